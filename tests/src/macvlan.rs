//! A campus LAN a test makes for itself, for an existing macvlan node network: a veth pair
//! whose host end (`cmvp<B>`, no address) is the macvlan's parent and whose other end sits in a
//! namespace (`cmv-<B>`) at `10.248.<B>.1/24`, standing in for the LAN's router and its hosts,
//! with the node's own LAN address `10.248.<B>.2/24` on the parent, as on a real node (so the
//! host's packets to the LAN go out of the parent, never by the default route);
//! and the LXD macvlan network `cmvn<B>` onto the parent, as an admin would make it. `B` is the
//! block of a claimed [`TestNetwork`], so no two tests share one; what a dead holder left is
//! removed first, and everything goes on `Drop` (after the instances on it, which the test's
//! project takes with it: declare this before the `TestLxd`). Packets only go to these addresses.

use std::net::Ipv4Addr;

use crate::network::{run, Netns, TestNetwork};

pub struct TestMacvlan {
    block: u8,
}

impl TestMacvlan {
    /// The LAN and the macvlan network on it, in `net`'s block.
    pub fn on(net: &TestNetwork) -> Self {
        let lan = TestMacvlan { block: net.block() };
        lan.clear();
        let (parent, peer, ns) = (lan.parent(), lan.peer(), lan.namespace());
        run("ip", &["netns", "add", &ns]);
        run(
            "ip",
            &[
                "link", "add", &parent, "type", "veth", "peer", "name", &peer,
            ],
        );
        run("ip", &["link", "set", &peer, "netns", &ns]);
        let own = format!("{}/24", lan.node_address());
        run("ip", &["addr", "add", &own, "dev", &parent]);
        run("ip", &["link", "set", &parent, "up"]);
        let router = format!("{}/24", lan.router());
        run("ip", &["-n", &ns, "addr", "add", &router, "dev", &peer]);
        run("ip", &["-n", &ns, "link", "set", &peer, "up"]);
        run("ip", &["-n", &ns, "link", "set", "lo", "up"]);
        run(
            "lxc",
            &[
                "network",
                "create",
                &lan.name(),
                "--type=macvlan",
                &format!("parent={parent}"),
            ],
        );
        lan
    }

    /// The LXD network's name.
    pub fn name(&self) -> String {
        format!("cmvn{}", self.block)
    }

    pub fn subnet(&self) -> String {
        format!("10.248.{}.0/24", self.block)
    }

    /// The LAN's router (and DNS), an address of the namespace.
    pub fn router(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 248, self.block, 1)
    }

    /// The node's own address on the LAN, on the parent.
    pub fn node_address(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 248, self.block, 2)
    }

    /// The `k`th address of the range given to the node (`.10` up).
    pub fn address(&self, k: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 248, self.block, 10 + k)
    }

    /// The namespace, as a LAN host at the router's address.
    pub fn host(&self) -> Netns {
        Netns {
            name: self.namespace(),
            address: self.router(),
            host: self.router(),
        }
    }

    fn parent(&self) -> String {
        format!("cmvp{}", self.block)
    }
    fn peer(&self) -> String {
        format!("cmvl{}", self.block)
    }
    fn namespace(&self) -> String {
        format!("cmv-{}", self.block)
    }

    /// Removes the LXD network, the namespace (with the peer) and the parent; each may be gone.
    fn clear(&self) {
        let quiet = |program: &str, args: &[&str]| {
            let _ = std::process::Command::new(program)
                .args(args)
                .env("LXD_DIR", crate::lxd::lxd_dir())
                .output();
        };
        quiet("lxc", &["network", "delete", &self.name()]);
        quiet("ip", &["netns", "delete", &self.namespace()]);
        quiet("ip", &["link", "delete", &self.parent()]);
    }
}

impl Drop for TestMacvlan {
    fn drop(&mut self) {
        self.clear();
    }
}
