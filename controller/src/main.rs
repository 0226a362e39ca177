//! `cohort-controller`: `migrate`, `init` and `serve`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use cohort_controller::agent_client::MtlsConnector;
use cohort_controller::config::Config;
use cohort_controller::controller::Controller;
use cohort_controller::pki::Pki;
use cohort_controller::{actions, db, server};
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
    /// Apply pending database migrations.
    Migrate,
    /// Create the CA and certificates in the state directory, migrate, create the first admin
    /// and print its API token (shown once).
    Init {
        #[arg(long, default_value = "admin")]
        admin: String,
    },
    /// Serve the API and run the job worker, the queue and the node poller.
    Serve,
}

fn migrate(config: &Config) -> anyhow::Result<diesel::PgConnection> {
    let mut conn = diesel::PgConnection::establish(&config.database.url)
        .with_context(|| "connecting to the database (DATABASE_URL)")?;
    for version in db::run_migrations(&mut conn)? {
        println!("applied migration {version}");
    }
    Ok(conn)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let logs = tracing_subscriber::fmt().with_env_filter(
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
    );
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let config = Config::load(cli.config.as_deref())?;
    match cli.command {
        Command::Migrate => {
            migrate(&config)?;
        }
        Command::Init { admin } => {
            let dir = &config.server.state_dir;
            Pki::create(dir, &config.server.server_names)
                .with_context(|| format!("creating the CA in {}", dir.display()))?;
            println!("created the CA and certificates in {}", dir.display());
            let mut conn = migrate(&config)?;
            let lifetime = actions::tokens::lifetime(&config.auth, None)?;
            let token = actions::users::bootstrap_admin(&mut conn, &admin, lifetime)?;
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
            let pool = db::pool(&config.database.url, config.database.pool_size)?;
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
            let agents = Arc::new(MtlsConnector::new(&pki));
            let ctl = Arc::new(Controller::new(pool, config, pki, agents));
            actix_web::rt::System::new().block_on(server::serve(ctl))?;
        }
    }
    Ok(())
}
