//! `Cluster::builder()`: how a test asks for a deployment (how many nodes, whose database, the
//! controller's configuration, an address other hosts reach it at). The `cohort-controller init`
//! step it runs is [`init_controller`], which the CLI tests' own controller runs too.

use std::net::Ipv4Addr;

use crate::{PortRange, TestDb};

use super::Cluster;

/// What [`Cluster::builder`] starts: by default a controller with no nodes, on a database of its
/// own, listening on loopback.
#[derive(Default)]
pub struct ClusterBuilder {
    nodes: usize,
    db_url: Option<String>,
    env: Vec<(String, String)>,
    reachable_at: Option<Ipv4Addr>,
}

impl ClusterBuilder {
    /// Enrolled agents named `node1`, `node2`, ..., all online when `start` returns.
    pub fn nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }

    /// The (empty) database at `url` instead of a per-test one, e.g. a
    /// [`crate::pg::PrivatePg`]'s; `cohort-controller init` migrates it.
    pub fn database(mut self, url: &str) -> Self {
        self.db_url = Some(url.to_string());
        self
    }

    /// Extra environment of every controller start (configuration, e.g. `COHORT_CPU_OVERCOMMIT`).
    pub fn env(mut self, env: &[(&str, &str)]) -> Self {
        self.env
            .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self
    }

    /// A controller that agents on other hosts reach at `address` (a test network's address on
    /// this host: see [`crate::lab`]); the test still talks to it on loopback. Its certificate
    /// names `address`, and join tokens carry its URL there.
    pub fn reachable_at(mut self, address: Ipv4Addr) -> Self {
        self.reachable_at = Some(address);
        self
    }

    pub async fn start(self) -> Cluster {
        let ports = PortRange::claim();
        let mut env: Vec<(String, String)> = Vec::new();
        if let Some(address) = self.reachable_at {
            let port = ports.port(0);
            env.push(("COHORT_LISTEN".into(), format!("0.0.0.0:{port}")));
            env.push((
                "COHORT_PUBLIC_URL".into(),
                format!("https://{address}:{port}"),
            ));
            env.push(("COHORT_SERVER_NAMES".into(), address.to_string()));
        }
        env.extend(self.env);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let (db, url) = match self.db_url {
            Some(url) => (None, url),
            None => {
                let db = TestDb::new();
                let url = db.url().to_string();
                (Some(db), url)
            }
        };
        Cluster::start_with_ports(self.nodes, db, url, &env, ports).await
    }
}
