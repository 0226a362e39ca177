//! `/1.0/networks`: the node network the agent reads, makes and asks for DHCP leases.

use std::collections::BTreeMap;

use hyper::Method;
use serde::{Deserialize, Serialize};

use super::client::encode;
use super::{Lxd, LxdError};

/// One LXD network, as `GET /1.0/networks/{name}` gives it.
#[derive(Debug, Clone, Deserialize)]
pub struct LxdNetwork {
    pub name: String,
    /// `bridge`, `macvlan`, `physical`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether LXD made it (and runs its dnsmasq and firewall rules).
    pub managed: bool,
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// The body of `POST /1.0/networks` (`NetworksPost`).
#[derive(Debug, Clone, Serialize)]
pub struct NetworksPost {
    pub name: String,
    /// `bridge`.
    #[serde(rename = "type")]
    pub kind: String,
    pub config: BTreeMap<String, String>,
}

/// One lease of LXD's dnsmasq.
#[derive(Debug, Clone, Deserialize)]
pub struct Lease {
    pub address: String,
}

impl Lxd {
    /// The network `name`, `None` when LXD has none of that name.
    pub async fn network(&self, name: &str) -> Result<Option<LxdNetwork>, LxdError> {
        match self
            .get_as(&format!("/1.0/networks/{}", encode(name)))
            .await
        {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every network of the daemon (`recursion=1`).
    pub async fn networks(&self) -> Result<Vec<LxdNetwork>, LxdError> {
        self.get_as("/1.0/networks?recursion=1").await
    }

    /// Makes a bridge with `config` (`ipv4.address`, `ipv4.nat`, ...).
    pub async fn create_bridge(
        &self,
        name: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<(), LxdError> {
        let body = NetworksPost {
            name: name.into(),
            kind: "bridge".into(),
            config: config.clone(),
        };
        self.send_json(Method::POST, "/1.0/networks", &body)
            .await
            .map(|_| ())
    }

    /// The DHCP leases LXD's dnsmasq handed out on `name` (static ones included).
    pub async fn network_leases(&self, name: &str) -> Result<Vec<Lease>, LxdError> {
        self.get_as(&format!("/1.0/networks/{}/leases", encode(name)))
            .await
    }
}
