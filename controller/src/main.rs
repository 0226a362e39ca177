//! `cohort-controller`: `migrate`, `init` and `serve`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use cohort_controller::accounts::{sign_in, tokens, users};
use cohort_controller::agent_client::MtlsConnector;
use cohort_controller::app::config::Config;
use cohort_controller::app::state::Controller;
use cohort_controller::app::{backup, server};
use cohort_controller::db;
use cohort_controller::nodes::pki::Pki;
use diesel::Connection;

#[derive(Parser)]
#[command(version, about = "Cohort's controller")]
struct Cli {
    /// TOML configuration file (environment variables override it).
    #[arg(long, env = "COHORT_CONFIG")]
    config: Option<PathBuf>,
    /// Log lines as human-readable text or as one JSON object a line.
    #[arg(long, global = true, env = "COHORT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Apply pending database migrations. Refused while another client (a running controller,
    /// say) is connected to the database, since it may not know the new schema: stop every
    /// controller, migrate, then start the new ones.
    Migrate {
        /// Migrate even though other sessions are connected (only when none is a controller).
        #[arg(long)]
        force: bool,
    },
    /// Write the database and the state directory (CA, certificates, image catalog) into one
    /// archive.
    Backup {
        /// Archive to write (default: cohort-backup-<UTC time>.tar.gz here).
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Restore an archive written by `backup` into an empty database and an empty state
    /// directory (a fresh host). Run `migrate` afterwards if this controller is newer.
    Restore { archive: PathBuf },
    /// Create the CA and certificates in the state directory, migrate, create the first admin
    /// and print its API token (shown once).
    Init {
        #[arg(long, default_value = "admin")]
        admin: String,
    },
    /// Set a user's portal password (argon2id), read from the first line of standard input.
    Password { username: String },
    /// Serve the API and run the job worker, the queue and the node poller.
    Serve,
}

fn migrate(config: &Config, force: bool) -> anyhow::Result<diesel::PgConnection> {
    let mut conn = diesel::PgConnection::establish(&config.database.url)
        .with_context(|| "connecting to the database (DATABASE_URL)")?;
    let pending = db::pending_migrations(&mut conn)?;
    if !pending.is_empty() && !force {
        let others = db::other_sessions(&mut conn)?;
        if !others.is_empty() {
            anyhow::bail!(
                "{} migration(s) to apply ({}), but {} other session(s) are connected to this \
                 database and may be controllers that do not know the new schema:\n  {}\n\
                 Stop every controller, run `cohort-controller migrate` again, then start the \
                 new controllers (`--force` migrates anyway, when none of these is a controller)",
                pending.len(),
                pending.join(", "),
                others.len(),
                others
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n  ")
            );
        }
    }
    for version in db::run_migrations(&mut conn)? {
        println!("applied migration {version}");
    }
    Ok(conn)
}

fn main() -> anyhow::Result<()> {
    let returned = cohort_controller::app::malloc::return_large_blocks();
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt().with_env_filter(
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
    );
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    if !returned {
        tracing::warn!("the C allocator refused its large-block threshold; memory freed after sign-ins may stay resident");
    }
    let config = Config::load(cli.config.as_deref())?;
    match cli.command {
        Command::Migrate { force } => {
            migrate(&config, force)?;
        }
        Command::Password { username } => {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .context("reading the password from standard input")?;
            let password = line.trim_end_matches(['\r', '\n']);
            let mut conn = diesel::PgConnection::establish(&config.database.url)
                .with_context(|| "connecting to the database (DATABASE_URL)")?;
            sign_in::set_password(&mut conn, &username, password)?;
            println!("set the portal password of {username}");
        }
        Command::Backup { output } => {
            let output = output.unwrap_or_else(|| {
                PathBuf::from(format!(
                    "cohort-backup-{}.tar.gz",
                    chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
                ))
            });
            let manifest = backup::backup(&config.database.url, &config.server.state_dir, &output)?;
            println!(
                "backed up the database (schema {}) and {} file(s) of {} into {}",
                manifest.schema_version,
                manifest.state_files.len(),
                config.server.state_dir.display(),
                output.display()
            );
        }
        Command::Restore { archive } => {
            let manifest =
                backup::restore(&config.database.url, &config.server.state_dir, &archive)?;
            println!(
                "restored the backup of {} (schema {}, controller {}) into the database and {}",
                manifest.created_at.to_rfc3339(),
                manifest.schema_version,
                manifest.controller_version,
                config.server.state_dir.display()
            );
            let mut conn = diesel::PgConnection::establish(&config.database.url)?;
            let pending = db::pending_migrations(&mut conn)?;
            if !pending.is_empty() {
                println!(
                    "this controller has {} newer migration(s): run `cohort-controller migrate`",
                    pending.len()
                );
            }
        }
        Command::Init { admin } => {
            let dir = &config.server.state_dir;
            // Each container's notebook has a host of its own under the notebook domain.
            let mut names = config.server.server_names.clone();
            names.push(format!("*.{}", config.server.notebook_domain));
            Pki::create(dir, &names)
                .with_context(|| format!("creating the CA in {}", dir.display()))?;
            println!("created the CA and certificates in {}", dir.display());
            let mut conn = migrate(&config, false)?;
            let lifetime = tokens::lifetime(&config.auth, None)?;
            let token = users::bootstrap_admin(&mut conn, &admin, lifetime)?;
            println!("admin user: {admin}");
            println!("admin token (shown once): {token}");
        }
        Command::Serve => {
            let pki = Arc::new(Pki::load(&config.server.state_dir).with_context(|| {
                format!(
                    "loading the CA from {} (run init first)",
                    config.server.state_dir.display()
                )
            })?);
            let pool = db::pool_with(
                &config.database.url,
                config.database.pool_size,
                &config.database.session(),
            )?;
            // An older database under a newer controller fails later in odd places: say so now.
            let pending = db::pending_migrations(&mut *pool.get()?)?;
            if !pending.is_empty() {
                anyhow::bail!(
                    "the database lacks {} migration(s) of this controller ({}); run \
                     `cohort-controller migrate` first",
                    pending.len(),
                    pending.join(", ")
                );
            }
            let agents = Arc::new(MtlsConnector::new(&pki, config.node_calls));
            let ctl = Arc::new(Controller::new(pool, config, pki, agents));
            actix_web::rt::System::new().block_on(server::serve(ctl))?;
        }
    }
    Ok(())
}
