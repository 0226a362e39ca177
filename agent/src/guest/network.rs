//! The container's side of its NIC, written into its root filesystem before the first boot so
//! the boot needs no DHCP round trip: a oneshot unit that sets the static address and default
//! route with iproute2, wanted by `multi-user.target` through a drop-in, and `resolv.conf`
//! naming the bridge's dnsmasq (the LAN's DNS server on a macvlan).
//!
//! Not systemd-networkd, although the base image has it: the image has no udev, and networkd
//! (252) waits for udev to initialise every link whenever `/sys` is writable, which it is in an
//! LXD container, so it never configures one (measured: "link pending udev initialization").

use std::net::Ipv4Addr;

use bytes::Bytes;

use crate::idmap::rootfs::RootFile;
use crate::instances::{InstanceError, Instances};
use crate::network::{NodeNetwork, GUEST_INTERFACE};

const UNIT_PATH: &str = "/etc/systemd/system/cohort-network.service";
const WANTS_PATH: &str = "/etc/systemd/system/multi-user.target.d/cohort-network.conf";
const RESOLV_PATH: &str = "/etc/resolv.conf";

/// The unit that gives the interface its address; idempotent (`replace`), so a restart of it
/// or a second boot changes nothing.
pub fn unit(address: Ipv4Addr, prefix: u8, gateway: Ipv4Addr) -> String {
    format!(
        "# Written by Cohort's agent: this container's address on the node network.\n\
         [Unit]\n\
         Description=Cohort node network ({GUEST_INTERFACE} {address}/{prefix})\n\
         DefaultDependencies=no\n\
         Before=network.target ssh.service\n\
         Wants=network.target\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         RemainAfterExit=yes\n\
         ExecStart=ip link set dev {GUEST_INTERFACE} up\n\
         ExecStart=ip address replace {address}/{prefix} dev {GUEST_INTERFACE}\n\
         ExecStart=ip route replace default via {gateway} dev {GUEST_INTERFACE}\n"
    )
}

/// The three files for a container at `address` on `network`.
pub fn files(network: &NodeNetwork, address: Ipv4Addr) -> Vec<RootFile<'static>> {
    vec![
        RootFile {
            path: UNIT_PATH,
            content: unit(address, network.subnet.prefix_len(), network.gateway).into_bytes(),
            mode: 0o644,
        },
        RootFile {
            path: WANTS_PATH,
            content: b"[Unit]\nWants=cohort-network.service\n".to_vec(),
            mode: 0o644,
        },
        RootFile {
            path: RESOLV_PATH,
            content: format!("nameserver {}\n", network.dns).into_bytes(),
            mode: 0o644,
        },
    ]
}

/// Writes the files into a running container (arguments: the three contents) and applies
/// them at once, after a NIC was plugged into it. `resolv.conf` is replaced, never written
/// through a link.
const APPLY_NOW: &str = r#"set -eu
mkdir -p /etc/systemd/system/multi-user.target.d
printf '%s' "$1" > /etc/systemd/system/cohort-network.service
printf '%s' "$2" > /etc/systemd/system/multi-user.target.d/cohort-network.conf
rm -f /etc/resolv.conf
printf '%s' "$3" > /etc/resolv.conf
systemctl daemon-reload
systemctl restart cohort-network.service
"#;

impl Instances {
    /// Writes the network files into the stopped container `name`: straight into its root
    /// filesystem where it is on this host, otherwise through LXD's file API.
    pub(crate) async fn write_guest_network(
        &self,
        name: &str,
        network: &NodeNetwork,
        address: Ipv4Addr,
    ) -> Result<(), InstanceError> {
        let files = files(network, address);
        let to_write = files.clone();
        let written = self
            .on_host(name, "writing the network config", move |rootfs| {
                crate::idmap::rootfs::write_files(rootfs, &to_write)
            })
            .await;
        if written.is_some() {
            return Ok(());
        }
        self.push_guest_files(name, files).await
    }

    /// Writes the network files into the running container `name` and applies them.
    pub(crate) async fn apply_guest_network(
        &self,
        name: &str,
        network: &NodeNetwork,
        address: Ipv4Addr,
    ) -> Result<(), InstanceError> {
        let mut argv = vec![
            "/bin/sh".to_string(),
            "-c".into(),
            APPLY_NOW.into(),
            "cohort-network".into(),
        ];
        argv.extend(
            files(network, address)
                .into_iter()
                .map(|f| String::from_utf8_lossy(&f.content).into_owned()),
        );
        let out = self
            .run_command(name, argv, std::time::Duration::from_secs(60))
            .await?;
        if out.exit_code != 0 {
            return Err(InstanceError::Internal(format!(
                "configuring the network in {name}: exit code {}: {}",
                out.exit_code,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// Through LXD's file API, which makes no parent directory itself.
    async fn push_guest_files(
        &self,
        name: &str,
        files: Vec<RootFile<'static>>,
    ) -> Result<(), InstanceError> {
        let wants_dir = WANTS_PATH.rsplit_once('/').map_or("/", |(dir, _)| dir);
        self.push_directory(name, wants_dir).await?;
        for file in files {
            let content = Bytes::from(file.content);
            self.push_file(name, file.path, content, file.mode, 0, 0)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_sets_the_address_and_route_and_dns_is_the_bridge() {
        let net = NodeNetwork {
            name: "cohort0".into(),
            kind: crate::network::NetworkKind::Bridge,
            subnet: "10.161.16.0/22".parse().unwrap(),
            gateway: "10.161.16.1".parse().unwrap(),
            dns: "10.161.16.1".parse().unwrap(),
            pool: None,
            dhcp_ranges: Vec::new(),
            ssh_address: "10.161.16.1".parse().unwrap(),
        };
        let files = files(&net, "10.161.16.9".parse().unwrap());
        let unit = String::from_utf8(files[0].content.clone()).unwrap();
        assert!(unit.contains("ExecStart=ip address replace 10.161.16.9/22 dev eth0\n"));
        assert!(unit.contains("ExecStart=ip route replace default via 10.161.16.1 dev eth0\n"));
        assert_eq!(files[1].path, WANTS_PATH);
        assert_eq!(files[2].content, b"nameserver 10.161.16.1\n");
    }
}
