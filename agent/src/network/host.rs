//! The host's own address where students reach it: the address of the interface that holds the
//! default route, read with iproute2 (`ip -j`), which every node has.

use std::net::Ipv4Addr;
use std::process::Command;

use serde_json::Value;

/// The first global IPv4 address of the default route's interface; `None` without one.
pub fn default_route_address() -> Option<Ipv4Addr> {
    let routes = ip_json(&["-4", "-j", "route", "show", "default"])?;
    let dev = routes
        .as_array()?
        .first()?
        .get("dev")?
        .as_str()?
        .to_string();
    let addrs = ip_json(&["-4", "-j", "addr", "show", "dev", &dev])?;
    first_global_address(&addrs)
}

fn ip_json(args: &[&str]) -> Option<Value> {
    let out = Command::new("ip").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

/// The first `scope global` IPv4 address in `ip -j addr` output.
pub fn first_global_address(addrs: &Value) -> Option<Ipv4Addr> {
    addrs
        .as_array()?
        .iter()
        .filter_map(|link| link.get("addr_info")?.as_array())
        .flatten()
        .filter(|a| a.get("family").and_then(Value::as_str) == Some("inet"))
        .filter(|a| a.get("scope").and_then(Value::as_str) == Some("global"))
        .find_map(|a| a.get("local")?.as_str()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_global_ipv4_address_of_the_link_is_taken() {
        let v: Value = serde_json::from_str(
            r#"[{"ifname":"eth0","addr_info":[
                {"family":"inet6","local":"fe80::1","scope":"link"},
                {"family":"inet","local":"169.254.0.2","scope":"link"},
                {"family":"inet","local":"192.0.2.2","prefixlen":24,"scope":"global"}]}]"#,
        )
        .unwrap();
        assert_eq!(first_global_address(&v), Some("192.0.2.2".parse().unwrap()));
        assert_eq!(first_global_address(&serde_json::json!([])), None);
    }
}
