//! `cohort remote`: add (fetch, show and pin the certificate, check the token), list, switch,
//! remove, get-default.

use std::io::{BufRead, Write};

use cohort_proto::api::users::Me;

use super::Session;
use crate::args::remote::{Remote, RemoteAdd, RemoteCommand, RemoteList};
use crate::client::{self, Client};
use crate::config;
use crate::render::{self, Rows};
use crate::tls;

pub async fn run(session: &mut Session, args: Remote) -> anyhow::Result<()> {
    match args.command {
        RemoteCommand::Add(add) => self::add(session, add).await,
        RemoteCommand::List(list) => self::list(session, list),
        RemoteCommand::Switch(r) => {
            session.config.switch_remote(&r.name)?;
            Ok(session.config.save()?)
        }
        RemoteCommand::Remove(r) => {
            session.config.remove_remote(&r.name)?;
            Ok(session.config.save()?)
        }
        RemoteCommand::GetDefault => {
            println!("{}", session.config.default_name()?);
            Ok(())
        }
    }
}

async fn add(session: &mut Session, args: RemoteAdd) -> anyhow::Result<()> {
    if let Ok(existing) = session.config.remote(&args.name) {
        return Err(config::ConfigError::RemoteExists(args.name, existing.addr.clone()).into());
    }
    let url = client::normalize_url(&args.url)?;
    let der = client::fetch_certificate(&url).await?;
    let fingerprint = tls::fingerprint(&der);
    if !args.accept_certificate {
        println!("Certificate fingerprint: {fingerprint}");
        print!("ok (y/n/[fingerprint])? ");
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        let answer = answer.trim().to_lowercase();
        if !(answer == "y" || answer == "yes" || answer == fingerprint) {
            anyhow::bail!("Server certificate NACKed by user");
        }
    }
    let remote = config::Remote {
        addr: url,
        token: args.token,
        fingerprint,
    };
    // A wrong token is refused here rather than at first use, as lxc checks its trust.
    let me: Me = Client::new(&remote)?.get("/me").await?;
    session.config.add_remote(&args.name, remote)?;
    session.config.save()?;
    if !session.quiet {
        let role = render::wire_name(me.user.role);
        eprintln!(
            "Remote {} added as {} ({role})",
            args.name, me.user.username
        );
    }
    Ok(())
}

fn list(session: &Session, args: RemoteList) -> anyhow::Result<()> {
    let config = &session.config;
    let mut rows = Rows::new([
        "NAME",
        "URL",
        "PROTOCOL",
        "AUTH TYPE",
        "PUBLIC",
        "STATIC",
        "GLOBAL",
    ]);
    for (name, remote) in &config.remotes {
        let shown = if *name == config.default_remote {
            format!("{name} (current)")
        } else {
            name.clone()
        };
        rows.push([
            shown.as_str(),
            &remote.addr,
            "cohort",
            "token",
            "NO",
            "NO",
            "NO",
        ]);
    }
    // Tokens are secrets: json/yaml show everything else.
    let shown: std::collections::BTreeMap<_, _> = config
        .remotes
        .iter()
        .map(|(name, r)| {
            let entry = serde_json::json!({
                "addr": r.addr,
                "protocol": "cohort",
                "auth_type": "token",
                "fingerprint": r.fingerprint,
            });
            (name.clone(), entry)
        })
        .collect();
    render::print(args.format, &rows, &shown)
}
