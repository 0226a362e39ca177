//! A course's network policy on one container: recorded in the instance's config (LXD stays
//! the record, so a restarted agent rebuilds the same table) and enforced by the firewall table,
//! which is rebuilt at once, so a change reaches running containers without a restart.

use cohort_proto::agent::{Egress as WireEgress, NetworkPolicy};
use cohort_proto::validate;
use ipnet::Ipv4Net;

use super::firewall::Egress;
use super::NetworkError;

/// The instance config key holding the policy (JSON of [`NetworkPolicy`]).
pub const KEY_POLICY: &str = "user.cohort.network_policy";

/// A policy as the firewall takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    pub egress: Egress,
    pub ssh_from: Vec<Ipv4Net>,
}

/// Checks `policy`; a 400 naming the field when it is bad.
pub fn check(policy: &NetworkPolicy) -> Result<Rules, NetworkError> {
    validate::network_policy(policy).map_err(|e| NetworkError::Invalid {
        field: format!("network_policy.{}", e.field),
        message: e.message,
    })?;
    let net = |(addr, prefix): (std::net::Ipv4Addr, u8)| {
        Ipv4Net::new(addr, prefix)
            .expect("validated prefix")
            .trunc()
    };
    let egress = match &policy.egress {
        WireEgress::Open => Egress::Open,
        WireEgress::None => Egress::None,
        WireEgress::Allow(list) => Egress::Allow(
            list.iter()
                .map(|e| {
                    let (a, p, port) = validate::egress_destination(e).expect("validated");
                    (net((a, p)), port)
                })
                .collect(),
        ),
    };
    let ssh_from = policy
        .ssh_from
        .iter()
        .map(|c| net(validate::ipv4_cidr(c).expect("validated")))
        .collect();
    Ok(Rules { egress, ssh_from })
}

/// The rules of a recorded policy.
pub fn parse(recorded: &str) -> Result<Rules, String> {
    let policy: NetworkPolicy = serde_json::from_str(recorded).map_err(|e| e.to_string())?;
    check(&policy).map_err(|e| e.to_string())
}

/// The config value recording `policy`.
pub fn record(policy: &NetworkPolicy) -> String {
    serde_json::to_string(policy).expect("policy serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_policy_round_trips_into_rules() {
        let policy = NetworkPolicy {
            egress: WireEgress::Allow(vec!["192.0.2.9/24:80".into()]),
            ssh_from: vec!["198.51.100.0/24".into()],
        };
        let rules = parse(&record(&policy)).unwrap();
        assert_eq!(
            rules.egress,
            Egress::Allow(vec![("192.0.2.0/24".parse().unwrap(), Some(80))])
        );
        assert_eq!(rules.ssh_from, vec!["198.51.100.0/24".parse().unwrap()]);
        assert_eq!(parse("{}").unwrap().egress, Egress::Open);
        assert!(parse("{\"egress\": \"closed\"}").is_err());
        let bad = NetworkPolicy {
            egress: WireEgress::None,
            ssh_from: vec!["nope".into()],
        };
        let err = check(&bad).unwrap_err();
        assert!(
            matches!(&err, NetworkError::Invalid { field, .. } if field == "network_policy.ssh_from[0]"),
            "{err}"
        );
    }
}
