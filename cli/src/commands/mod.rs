//! One runner per verb, as youki's `commands/<verb>.rs` runs runc's verbs; [`Session`] is what
//! they share: the configuration, `--quiet`, and turning `[<remote>:]<name>` into a client.

pub mod action;
pub mod audit;
pub mod cluster;
pub mod completion;
pub mod config;
pub mod course;
pub mod course_archive;
pub mod course_budget;
pub mod course_data;
pub mod course_limits;
pub mod course_network;
pub mod delete;
pub mod exec;
pub mod file;
pub mod gpu;
pub mod home;
pub mod image;
pub mod info;
pub mod job;
pub mod launch;
pub mod list;
pub mod move_instance;
pub mod node;
pub mod operation;
pub mod publish;
pub mod remote;
pub mod snapshot;
pub mod trust;
pub mod usage;
pub mod user;

use std::io::{BufRead, Write};

use crate::args::{Cli, Verb};
use crate::client::Client;
use crate::config::Config;

/// What every verb runs with.
pub struct Session {
    pub config: Config,
    pub quiet: bool,
}

impl Session {
    pub fn load(quiet: bool) -> anyhow::Result<Self> {
        let config = Config::load(&Config::default_path()?)?;
        Ok(Session { config, quiet })
    }

    /// The client for a remote by name.
    pub fn client(&self, remote: &str) -> anyhow::Result<Client> {
        Client::new(self.config.remote(remote)?)
    }

    /// `[<remote>:]<name>` into the remote's client and the name; the name may not be empty.
    pub fn target(&self, raw: &str) -> anyhow::Result<(Client, String)> {
        let (remote, name) = self.config.parse_remote(raw)?;
        if name.is_empty() {
            anyhow::bail!("Missing name in {raw:?}: expected [<remote>:]<name>");
        }
        Ok((self.client(&remote)?, name))
    }

    /// An optional `[<remote>:]` argument: that remote, or the default one.
    pub fn remote_only(&self, raw: Option<&str>) -> anyhow::Result<Client> {
        match raw {
            None => self.client(self.config.default_name()?),
            Some(raw) => self.client(raw.strip_suffix(':').unwrap_or(raw)),
        }
    }
}

/// Asks a yes/no question on stderr as lxc does; anything but yes/y is no.
pub fn confirm(question: &str) -> anyhow::Result<bool> {
    eprint!("{question} (yes/no) [default=no]: ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes"))
}

/// Runs the parsed command line; the value is the process exit code (exec passes its command's).
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    if let Verb::Completion(args) = &cli.verb {
        completion::run(args);
        return Ok(0);
    }
    let mut session = Session::load(cli.quiet)?;
    match cli.verb {
        Verb::Remote(args) => remote::run(&mut session, args).await?,
        Verb::List(args) => list::run(&session, args).await?,
        Verb::Launch(args) => launch::launch(&session, args).await?,
        Verb::Init(args) => launch::init(&session, args).await?,
        Verb::Start(args) => action::start(&session, args).await?,
        Verb::Stop(args) => action::stop(&session, args).await?,
        Verb::Restart(args) => action::restart(&session, args).await?,
        Verb::Delete(args) => delete::run(&session, args).await?,
        Verb::Move(args) => move_instance::run(&session, args).await?,
        Verb::Info(args) => info::run(&session, args).await?,
        Verb::Exec(args) => return exec::run(&session, args).await,
        Verb::Config(args) => config::run(&session, args).await?,
        Verb::Snapshot(args) => snapshot::snapshot(&session, args).await?,
        Verb::Restore(args) => snapshot::restore(&session, args).await?,
        Verb::File(args) => file::run(&session, args).await?,
        Verb::Image(args) => image::run(&session, args).await?,
        Verb::Publish(args) => publish::run(&session, args).await?,
        Verb::Cluster(args) => cluster::run(&session, args).await?,
        Verb::Operation(args) => operation::run(&session, args).await?,
        Verb::Node(args) => node::run(&session, args).await?,
        Verb::Course(args) => return course::run(&session, args).await,
        Verb::User(args) => user::run(&session, args).await?,
        Verb::Audit(args) => audit::run(&session, args).await?,
        Verb::Usage(args) => usage::run(&session, args).await?,
        Verb::Gpu(args) => gpu::run(&session, args).await?,
        Verb::Job(args) => job::run(&session, args).await?,
        Verb::Home(args) => home::run(&session, args).await?,
        Verb::Completion(_) => unreachable!("handled before the configuration is read"),
    }
    Ok(0)
}
