//! What the agent writes inside a container, as the guest sees it: the student's user and the
//! sshd readiness probe (`ssh`), the SSH host key (`host_key`), and the guest's side of its NIC
//! on the node network (`network`), and the GPU memory cap of a container sharing its GPU
//! (`cuda_cap`). Each is a part of [`Instances`](crate::instances::Instances) that its verbs
//! call; the files go in through the instance's file and exec calls, or straight into a stopped
//! container's root filesystem on this host (`idmap::rootfs`).

pub mod cuda_cap;
pub mod host_key;
pub mod network;
pub mod ssh;
