//! `cohort config trust add|list|remove`: tokens that admit the real `lxc` client (and pylxd) to
//! the controller's LXD-style API, and the certificates they admitted.

use cohort_proto::api::lxd_trust::{CreateTrustToken, TrustEntry, TrustTokenIssued};
use reqwest::Method;

use super::Session;
use crate::args::config::{Trust, TrustCommand};
use crate::client::seg;
use crate::render::{self, Rows};

const TIME: &str = "%Y/%m/%d %H:%M %Z";

pub async fn run(session: &Session, args: Trust) -> anyhow::Result<()> {
    match args.command {
        TrustCommand::Add(add) => {
            let (client, name) = session.target(&add.name)?;
            let req = CreateTrustToken {
                name,
                user: add.user,
            };
            let issued: TrustTokenIssued = client.post("/lxd/trust", &req).await?;
            println!("Client {} certificate add token:", issued.name);
            println!("{}", issued.token);
            Ok(())
        }
        TrustCommand::List(list) => {
            let client = session.remote_only(list.remote.as_deref())?;
            let entries: Vec<TrustEntry> = client.get("/lxd/trust").await?;
            let mut rows = Rows::new(["NAME", "USER", "FINGERPRINT", "CREATED", "EXPIRES"]);
            for e in &entries {
                rows.push([
                    e.name.clone(),
                    e.user.clone(),
                    e.fingerprint
                        .as_deref()
                        .map_or("(pending token)".to_string(), |f| f[..12].to_string()),
                    e.created_at.format(TIME).to_string(),
                    e.expires_at
                        .map(|t| t.format(TIME).to_string())
                        .unwrap_or_default(),
                ]);
            }
            render::print(list.format, &rows, &entries)
        }
        TrustCommand::Remove(remove) => {
            let (client, name) = session.target(&remove.name)?;
            let path = format!("/lxd/trust/{}", seg(&name));
            client.call(client.request(Method::DELETE, &path)).await
        }
    }
}
