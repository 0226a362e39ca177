//! Nodes: listing, cordon, evacuate, restore and removal ([`manage`]), enrollment by join token
//! and CSR ([`enroll`]), the Cohort CA ([`pki`]), trust for the LXD-style API ([`lxd_trust`])
//! and the fleet's GPUs ([`gpus`]).

pub mod enroll;
pub mod gpus;
pub mod lxd_trust;
pub mod manage;
pub mod pki;
