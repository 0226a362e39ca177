//! Configuration: a TOML file, then environment overrides. Every default is in the doc comment of
//! its field.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// the configuration file could not be read
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// the configuration file is not valid TOML for this schema
    #[error("invalid configuration in {path}: {source}")]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    /// an environment override does not parse
    #[error("invalid value {value:?} for {var}")]
    Env { var: &'static str, value: String },
    /// a setting is out of its range
    #[error("{setting} must be {rule}, not {value}")]
    Range {
        setting: &'static str,
        rule: &'static str,
        value: String,
    },
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub database: DatabaseConfig,
    pub server: ServerConfig,
    pub poller: PollerConfig,
    pub worker: WorkerConfig,
    pub placement: PlacementConfig,
    pub reclaim: ReclaimConfig,
    pub limits: LimitsConfig,
    pub auth: AuthConfig,
    pub ldap: LdapConfig,
    pub node_calls: AgentClientConfig,
}

/// How long the controller waits on a node's agent ([`crate::agent_client`]). A call in flight
/// when a link goes dark must not hold a worker permit for minutes: ordinary calls get a short
/// deadline, only the calls that wait on the node's daemon or stream a tarball a long one.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentClientConfig {
    /// `COHORT_NODE_CONNECT_TIMEOUT_S`: seconds to reach an agent (TCP and TLS); default 5.
    pub connect_timeout_s: u64,
    /// `COHORT_NODE_REQUEST_TIMEOUT_S`: seconds an ordinary call (inventory, reads, settings)
    /// may take from request to answer; default 30.
    pub request_timeout_s: u64,
    /// `COHORT_NODE_DAEMON_TIMEOUT_S`: seconds a call that waits on the node's daemon
    /// (start/stop, delete, snapshots, arrival, GPUs, SSH keys) may take; default 330, a little
    /// over the agent's own 300 s wait on LXD, so its answer (504) is heard rather than cut off.
    pub daemon_timeout_s: u64,
    /// `COHORT_NODE_TRANSFER_TIMEOUT_S`: seconds a streaming call (create, which may fetch the
    /// image first; backup export and import; publish; image import; file transfer) may take in
    /// all; default 3600.
    pub transfer_timeout_s: u64,
}

impl Default for AgentClientConfig {
    fn default() -> Self {
        AgentClientConfig {
            connect_timeout_s: 5,
            request_timeout_s: 30,
            daemon_timeout_s: 330,
            transfer_timeout_s: 3600,
        }
    }
}

impl AgentClientConfig {
    /// Every deadline must be at least a second (0 would fail every call at once).
    fn check(&self) -> Result<(), ConfigError> {
        for (setting, value) in [
            ("node_calls.connect_timeout_s", self.connect_timeout_s),
            ("node_calls.request_timeout_s", self.request_timeout_s),
            ("node_calls.daemon_timeout_s", self.daemon_timeout_s),
            ("node_calls.transfer_timeout_s", self.transfer_timeout_s),
        ] {
            if value == 0 {
                return Err(ConfigError::Range {
                    setting,
                    rule: "at least 1",
                    value: "0".into(),
                });
            }
        }
        Ok(())
    }
}

/// How much of a request or of an instance's output one call may move.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// `COHORT_FILE_LIMIT_MIB`: largest file pushed into or pulled from an instance, in MiB;
    /// default 256. A pull past it ends with an error instead of the rest of the file.
    pub file_mib: u64,
    /// `COHORT_EXEC_OUTPUT_LIMIT_MIB`: largest stdout plus stderr an exec returns, in MiB;
    /// default 16. A command that writes more gets a 413 naming `stdout` or `stderr`.
    pub exec_output_mib: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            file_mib: 256,
            exec_output_mib: 16,
        }
    }
}

impl LimitsConfig {
    pub fn file_bytes(&self) -> usize {
        usize::try_from(self.file_mib << 20).unwrap_or(usize::MAX)
    }

    pub fn exec_output_bytes(&self) -> u64 {
        self.exec_output_mib << 20
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// `COHORT_TOKEN_DAYS`: lifetime of an API token issued without `expires_in_days` (and of the
    /// first admin's token from `init`); default 90.
    pub token_days: u32,
    /// `COHORT_TOKEN_MAX_DAYS`: the longest lifetime a caller may ask for; default 365.
    pub token_max_days: u32,
    /// `COHORT_AUTH_FAILURES_PER_MINUTE`: failed authentications (401s) one source address may
    /// have in a minute before its requests are answered 429 for the rest of that minute;
    /// default 20, 0 turns the limit off.
    pub failures_per_minute: u32,
    /// `COHORT_AUTH_FAILURE_SOURCES`: source addresses the failure table remembers at once (oldest
    /// forgotten first), so a flood from many addresses cannot grow it; default 10000.
    pub failure_sources: usize,
    /// `COHORT_SIGN_IN_SOURCE_FAILURES_PER_MINUTE`: failed portal sign-ins one source address may
    /// have in a minute, over all accounts, before its sign-ins are answered 429; default 600, 0
    /// turns it off. A portal sign-in is limited per source and account by
    /// `failures_per_minute`, so one student's typos behind a campus NAT lock out only that
    /// student; this much larger budget bounds a guesser trying many accounts.
    pub sign_in_source_failures_per_minute: u32,
    /// `COHORT_AUDIT_FAILURES_PER_MINUTE`: `failed_sign_in` rows written a minute; failures past
    /// this many are counted, by source and account or path, into one summary row written when
    /// the minute ends ([`crate::accounts::failure_audit`]); default 60.
    pub audit_failures_per_minute: u32,
    /// `COHORT_METRICS_TOKEN`: the bearer token Prometheus scrapes `/metrics` with; an admin's API
    /// token works too. Unset: only admin tokens; default unset.
    pub metrics_token: Option<String>,
    /// `COHORT_SESSION_MINUTES`: how long a portal session lasts from sign-in; default 480 (8 h).
    pub session_minutes: u32,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            token_days: 90,
            token_max_days: 365,
            failures_per_minute: 20,
            failure_sources: 10_000,
            sign_in_source_failures_per_minute: 600,
            audit_failures_per_minute: 60,
            metrics_token: None,
            session_minutes: 480,
        }
    }
}

/// Portal sign-in against the university's directory ([`crate::accounts::directory`]); off while `url`
/// is unset. A portal password, where a user has one, is tried first.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LdapConfig {
    /// `COHORT_LDAP_URL`: `ldaps://host[:port]`, or `ldap://` with `starttls`; default unset (no
    /// directory sign-in).
    pub url: Option<String>,
    /// `COHORT_LDAP_STARTTLS`: upgrade an `ldap://` connection with StartTLS; default false.
    pub starttls: bool,
    /// `COHORT_LDAP_CA_FILE`: PEM certificates trusted for the directory's TLS certificate;
    /// default `/etc/ssl/certs/ca-certificates.crt` (the system's).
    pub ca_file: PathBuf,
    /// `COHORT_LDAP_USER_DN`: the user's DN with `{username}` in it (e.g.
    /// `uid={username},ou=people,dc=uni,dc=edu`), bound directly; default unset (search instead).
    pub user_dn: Option<String>,
    /// `COHORT_LDAP_SEARCH_BASE`: where the user is searched for when `user_dn` is unset.
    pub search_base: String,
    /// `COHORT_LDAP_USER_FILTER`: the search filter, `{username}` escaped into it; default
    /// `(uid={username})`.
    pub user_filter: String,
    /// `COHORT_LDAP_BIND_DN` / `COHORT_LDAP_BIND_PASSWORD`: the service account that searches and
    /// reads groups; default unset (anonymous search, groups read as the user).
    pub bind_dn: Option<String>,
    pub bind_password: Option<String>,
    /// `COHORT_LDAP_INSTRUCTOR_GROUP`: DN of the group whose members (`member`, `uniqueMember` or
    /// `memberUid`) are instructors; default unset (everyone is a student).
    pub instructor_group: Option<String>,
    /// `COHORT_LDAP_ADMIN_GROUP`: DN of the group whose members are admins; default unset.
    pub admin_group: Option<String>,
    /// `COHORT_LDAP_TIMEOUT_S`: seconds a whole directory sign-in may take; default 10.
    pub timeout_s: u64,
}

impl Default for LdapConfig {
    fn default() -> Self {
        LdapConfig {
            url: None,
            starttls: false,
            ca_file: PathBuf::from("/etc/ssl/certs/ca-certificates.crt"),
            user_dn: None,
            search_base: String::new(),
            user_filter: "(uid={username})".into(),
            bind_dn: None,
            bind_password: None,
            instructor_group: None,
            admin_group: None,
            timeout_s: 10,
        }
    }
}

impl LdapConfig {
    /// Refuses a directory that would see passwords in clear, or could not find anyone.
    fn check(&self) -> Result<(), ConfigError> {
        let Some(url) = &self.url else {
            return Ok(());
        };
        let range = |setting, rule, value: &str| ConfigError::Range {
            setting,
            rule,
            value: value.to_string(),
        };
        let tls = url.starts_with("ldaps://") || (url.starts_with("ldap://") && self.starttls);
        if !tls {
            return Err(range(
                "ldap.url",
                "ldaps://..., or ldap://... with ldap.starttls (passwords never go in clear)",
                url,
            ));
        }
        match &self.user_dn {
            Some(dn) if !dn.contains("{username}") => {
                Err(range("ldap.user_dn", "a DN containing {username}", dn))
            }
            None if self.search_base.is_empty() || !self.user_filter.contains("{username}") => {
                Err(range(
                    "ldap.search_base",
                    "set, with a user_filter containing {username}, when user_dn is unset",
                    &self.search_base,
                ))
            }
            _ if self.timeout_s == 0 => Err(range("ldap.timeout_s", "at least 1", "0")),
            _ => Ok(()),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReclaimConfig {
    /// `COHORT_RECLAIM_INTERVAL_S`: seconds between two reclaim passes; default 60.
    pub interval_s: u64,
    /// `COHORT_RECLAIM_MINUTE_S`: seconds in one minute of a course's `idle_gpu_minutes`,
    /// `max_runtime_minutes` and `warn_minutes`; default 60 (tests shorten it).
    pub minute_s: u64,
    /// `COHORT_DELETE_AFTER_END_S`: seconds after a course's end at which its containers (stopped
    /// at the end) are deleted; default 604800 (7 days).
    pub delete_after_end_s: u64,
    /// `COHORT_RECLAIM_BUSY_CPU_PERCENT`: a container process at this share of one core or
    /// more (over the agent's one-second sample) is use, and keeps an idle-stop away; default
    /// 10 (1 to 10000).
    pub busy_cpu_percent: u32,
    /// `COHORT_GPU_LEASE_HOUR_S`: seconds in one hour of a GPU lease (on-demand courses);
    /// default 3600 (tests shorten it). The reclaim pass ends leases and grants queued ones.
    pub lease_hour_s: u64,
    /// `COHORT_JOB_INTERVAL_S`: seconds between two passes of the batch jobs' loop (starts,
    /// ends, limits); default 5. A submit or a cancel passes at once.
    pub job_interval_s: u64,
}

impl Default for ReclaimConfig {
    fn default() -> Self {
        ReclaimConfig {
            interval_s: 60,
            minute_s: 60,
            delete_after_end_s: 7 * 24 * 3600,
            busy_cpu_percent: cohort_proto::activity::DEFAULT_CPU_PERCENT,
            lease_hour_s: 3600,
            job_interval_s: 5,
        }
    }
}

impl ReclaimConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let most = cohort_proto::activity::MAX_CPU_PERCENT;
        if !(1..=most).contains(&self.busy_cpu_percent) {
            return Err(ConfigError::Range {
                setting: "reclaim.busy_cpu_percent",
                rule: "1 to 10000 (percent of one core)",
                value: self.busy_cpu_percent.to_string(),
            });
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `DATABASE_URL`; default `postgres://cohort:cohort@127.0.0.1:5432/cohort`, without TLS on
    /// loopback unless it names an sslmode ([`crate::db::url::without_loopback_tls`]).
    pub url: String,
    /// `COHORT_DB_POOL_SIZE`; default two connections per CPU core plus two
    /// ([`default_pool_size`]).
    pub pool_size: u32,
    /// `COHORT_PAGE_CACHE_ENTRIES`: pages of `GET /instances` kept in memory and served again
    /// while the database shows no change to them ([`crate::instances::page_cache`]); default 256, 0 keeps
    /// none.
    pub page_cache_entries: usize,
    /// `COHORT_DB_STATEMENT_TIMEOUT_MS`: the longest one statement may run; default 60000.
    pub statement_timeout_ms: u64,
    /// `COHORT_DB_LOCK_TIMEOUT_MS`: the longest a statement waits for a lock; default 10000.
    pub lock_timeout_ms: u64,
    /// `COHORT_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS`: a session idle inside a transaction this long
    /// is ended by the server and its locks freed; default 60000.
    pub idle_in_transaction_timeout_ms: u64,
    /// `COHORT_DB_CONNECT_TIMEOUT_S`: libpq's `connect_timeout`; default 10.
    pub connect_timeout_s: u64,
    /// `COHORT_DB_KEEPALIVE_IDLE_S`, `COHORT_DB_KEEPALIVE_INTERVAL_S`,
    /// `COHORT_DB_KEEPALIVE_COUNT`: TCP keepalives (libpq's `keepalives_*`); defaults 30, 10, 3:
    /// a database host gone without a reset is noticed in about a minute.
    pub keepalive_idle_s: u64,
    pub keepalive_interval_s: u64,
    pub keepalive_count: u32,
    /// `COHORT_DB_CHECKOUT_TIMEOUT_S`: the longest a call waits for a pooled connection;
    /// default 10.
    pub checkout_timeout_s: u64,
    /// `COHORT_DB_RETRIES`: times a unit of database work that met a deadlock or a
    /// serialization failure is run again (with a growing, jittered pause); default 5.
    pub retries: u32,
    /// `COHORT_AUDIT_RETENTION_DAYS`: audit rows older than this are pruned; default 365 (a
    /// year of who did what, past one academic year's disputes), 0 keeps them forever.
    pub audit_retention_days: u32,
    /// `COHORT_OPERATION_RETENTION_DAYS`: finished operations (and their items) older than this
    /// are pruned; default 90 (a term), 0 keeps them.
    pub operation_retention_days: u32,
    /// `COHORT_PRUNE_INTERVAL_S`: seconds between two pruning passes; default 3600.
    pub prune_interval_s: u64,
    /// `COHORT_GPU_USAGE_RETENTION_DAYS`: hourly GPU-time rows older than this are pruned;
    /// default 400 (a year of reports and the next year's comparison), 0 keeps them.
    pub gpu_usage_retention_days: u32,
}

impl DatabaseConfig {
    /// The limits of each pooled session.
    pub fn session(&self) -> crate::db::SessionLimits {
        use std::time::Duration;
        crate::db::SessionLimits {
            statement_timeout: Duration::from_millis(self.statement_timeout_ms),
            lock_timeout: Duration::from_millis(self.lock_timeout_ms),
            idle_in_transaction_timeout: Duration::from_millis(self.idle_in_transaction_timeout_ms),
            connect_timeout: Duration::from_secs(self.connect_timeout_s),
            keepalives_idle: Duration::from_secs(self.keepalive_idle_s),
            keepalives_interval: Duration::from_secs(self.keepalive_interval_s),
            keepalives_count: self.keepalive_count,
            checkout_timeout: Duration::from_secs(self.checkout_timeout_s),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// `COHORT_LISTEN`; default `127.0.0.1:8443` (HTTPS).
    pub listen: SocketAddr,
    /// `COHORT_PUBLIC_URL`: the URL agents and people reach the controller at, written into join
    /// tokens; default `https://<listen>`.
    pub public_url: Option<String>,
    /// `COHORT_STATE_DIR`: CA, certificates and image tarballs; default `/var/lib/cohort`.
    pub state_dir: PathBuf,
    /// `COHORT_SERVER_NAMES`: extra DNS names or IPs (comma-separated) for the server certificate
    /// made by `init`; `localhost` and `127.0.0.1` are always included; default none.
    pub server_names: Vec<String>,
    /// Largest image upload accepted, in MiB; default 4096.
    pub max_image_mib: u64,
    /// `COHORT_DATA_DIR`: where course datasets are stored (one tarball per version, named by
    /// its SHA-256); default `<state_dir>/data`.
    pub data_dir: Option<PathBuf>,
    /// `COHORT_DATA_QUOTA_MIB`: what a course's datasets may hold together when an admin set
    /// no quota for it, in MiB; default 10240.
    pub data_quota_mib: u64,
    /// `COHORT_ARCHIVE_DIR`: the archive store, where archived homes are kept
    /// (`<course>/<user>.tar.gz`); default `<state_dir>/archives`.
    pub archive_dir: Option<PathBuf>,
    /// `COHORT_ARCHIVE_DAYS`: the `archive_days` a new course takes when it names none, and
    /// how long the archives of a course made before that setting are kept; default 90. At
    /// least 1.
    pub archive_days: u32,
    /// `COHORT_ARCHIVE_SWEEP_S`: seconds between two sweeps deleting expired archives;
    /// default 3600. At least 1.
    pub archive_sweep_s: u64,
    /// `COHORT_NODE_CERT_LIFETIME_S`: how long a node's certificate is valid, in seconds; the
    /// poller renews it at two thirds of its life. Default one year (31536000); at least 30.
    pub node_cert_lifetime_s: u64,
    /// `COHORT_LXD_LISTEN`: where the LXD-style API for the real `lxc` client and pylxd is
    /// served (HTTPS, `/1.0`); default none (not served). A listener of its own because it takes
    /// any self-signed client certificate and trusts it by pinned fingerprint, while the main
    /// listener takes only certificates of the Cohort CA.
    pub lxd_listen: Option<SocketAddr>,
    /// `COHORT_LXD_ADDRESS`: `host:port` written into `lxc` trust tokens; default `lxd_listen`.
    pub lxd_address: Option<String>,
    /// `COHORT_LXD_TRUST_DAYS`: how long a certificate trusted with a token stays trusted;
    /// default 365 (then `cohort config trust add` again). At least 1.
    pub lxd_trust_days: u32,
    /// `COHORT_NOTEBOOK_DOMAIN`: each container's JupyterLab is served on an origin of its own,
    /// `https://<container>.<domain>:<the public URL's port>`, by this same listener, so that what
    /// a container serves can reach neither the portal nor another container's notebook. Needs a
    /// wildcard DNS name for `*.<domain>` (the certificate `init` makes carries it); default
    /// `notebooks.localhost`, which browsers resolve to this machine themselves.
    pub notebook_domain: String,
    /// `COHORT_MAX_CLOCK_SKEW_S`: how far this host's clock may be from the database's before
    /// the controller warns (at start, in its log) and `/healthz` flags it; default 5. Every
    /// lease, heartbeat and idle comparison uses the database's clock, so a skew is reported,
    /// not acted on.
    pub max_clock_skew_s: u64,
    /// `COHORT_TEST_KILL_LOOP`: a test-only fault: the named background loop (`worker`, `queue`,
    /// `poller`, `reclaimer`, `page_cache`) panics five seconds after each start, so the tests see
    /// `/healthz` report it dead. Default none; never set it in production.
    pub test_kill_loop: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PollerConfig {
    /// `COHORT_POLL_INTERVAL_S`: seconds between two inventory polls of a node; default 10.
    pub interval_s: u64,
    /// `COHORT_OFFLINE_AFTER_S`: a node not heard from for this long is `offline`; default 60.
    pub offline_after_s: u64,
    /// Seconds after start during which nothing is marked offline, so a controller restart
    /// cannot take nodes offline; default 60 (at least `offline_after_s` is sensible).
    pub startup_grace_s: u64,
    /// `COHORT_DRIFT_POLICY`: what the poller does about a container stopped, started or
    /// deleted in LXD behind Cohort's back: `report` (default: show it on the instance and in
    /// the audit log) or `repair` (also start the stopped one, stop the started one, re-create
    /// the missing one).
    pub drift: DriftPolicy,
    /// `COHORT_POLL_PAUSE_AFTER_LISTING_MS`: for tests only: a pause between a node's listing and
    /// its record, so a test can make the listing stale; default 0 (none).
    pub pause_after_listing_ms: u64,
    /// `COHORT_GPU_IDLE_BELOW_PERCENT`: a container's GPU counts as idle while its busy share
    /// (utilisation) stays under this, context held or not (see `app::gpu_time`); default 5.
    pub gpu_idle_below_percent: u32,
}

/// See [`PollerConfig::drift`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftPolicy {
    #[default]
    Report,
    Repair,
}

impl std::str::FromStr for DriftPolicy {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "report" => Ok(DriftPolicy::Report),
            "repair" => Ok(DriftPolicy::Repair),
            _ => Err(()),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkerConfig {
    /// `COHORT_WORKER_ID`: name of this process's claims; default `<hostname>-<pid>`.
    pub id: Option<String>,
    /// `COHORT_LEASE_S`: seconds a claim holds without renewal; default 30.
    pub lease_s: u64,
    /// Operations this process runs at once; default 4.
    pub concurrency: usize,
    /// `COHORT_ITEMS_PER_NODE`: items of one operation run at once on one node; default 4 (the
    /// agent bounds its own creates too).
    pub items_per_node: usize,
    /// Attempts of a step before its item fails; default 5.
    pub max_attempts: u32,
    /// First retry delay in seconds, doubled each attempt up to 60; default 2.
    pub backoff_s: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlacementConfig {
    /// `COHORT_CPU_OVERCOMMIT`: instance cores placed per node core; default 4.0.
    pub cpu_overcommit: f64,
    /// `COHORT_MEMORY_OVERCOMMIT`: instance memory placed per byte of node memory; default 1.0.
    pub memory_overcommit: f64,
    /// `COHORT_DISK_OVERCOMMIT`: instance root-disk quota placed per byte of the node's storage
    /// pool; default 1.0 (quotas on btrfs and zfs reserve nothing, so more is safe there).
    pub disk_overcommit: f64,
    /// Seconds between two passes over the queue; default 5.
    pub queue_interval_s: u64,
    /// `COHORT_DEFAULT_PROCESSES`: `limits.processes` of a container whose course sets none
    /// (and of every container outside a course): the most processes it may hold, so a fork
    /// bomb stays inside it; default 2000.
    pub default_processes: u32,
    /// `COHORT_DEFAULT_HOME_GIB`: the size of a student's home volume when their course sets
    /// none; default 5.
    pub default_home_gib: u32,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        DatabaseConfig {
            url: "postgres://cohort:cohort@127.0.0.1:5432/cohort".into(),
            pool_size: default_pool_size(),
            page_cache_entries: 256,
            statement_timeout_ms: 60_000,
            lock_timeout_ms: 10_000,
            idle_in_transaction_timeout_ms: 60_000,
            connect_timeout_s: 10,
            keepalive_idle_s: 30,
            keepalive_interval_s: 10,
            keepalive_count: 3,
            checkout_timeout_s: 10,
            retries: 5,
            audit_retention_days: 365,
            operation_retention_days: 90,
            prune_interval_s: 3600,
            gpu_usage_retention_days: 400,
        }
    }
}

/// Two database connections per CPU core of this host, plus two. More connections than the
/// cores can run only add waiting: with 16 on 2 cores, a page of `GET /instances` under 64
/// clients had a p99 of 75-101 ms, with 5-8 of 48-60 ms at the same throughput (BENCHMARKS.md,
/// benchmark 3). Requests beyond it queue for a connection in arrival order.
pub fn default_pool_size() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    u32::try_from(cores * 2 + 2).unwrap_or(u32::MAX)
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8443)),
            public_url: None,
            state_dir: PathBuf::from("/var/lib/cohort"),
            server_names: Vec::new(),
            max_image_mib: 4096,
            data_dir: None,
            data_quota_mib: 10_240,
            archive_dir: None,
            archive_days: 90,
            archive_sweep_s: 3600,
            node_cert_lifetime_s: 365 * 86_400,
            lxd_listen: None,
            lxd_address: None,
            lxd_trust_days: 365,
            notebook_domain: "notebooks.localhost".into(),
            max_clock_skew_s: 5,
            test_kill_loop: None,
        }
    }
}

impl Default for PollerConfig {
    fn default() -> Self {
        PollerConfig {
            interval_s: 10,
            offline_after_s: 60,
            startup_grace_s: 60,
            drift: DriftPolicy::Report,
            pause_after_listing_ms: 0,
            gpu_idle_below_percent: 5,
        }
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            id: None,
            lease_s: 30,
            concurrency: 4,
            items_per_node: 4,
            max_attempts: 5,
            backoff_s: 2,
        }
    }
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            cpu_overcommit: 4.0,
            memory_overcommit: 1.0,
            disk_overcommit: 1.0,
            queue_interval_s: 5,
            default_processes: 2000,
            default_home_gib: 5,
        }
    }
}

fn env_parse<T: std::str::FromStr>(var: &'static str, into: &mut T) -> Result<(), ConfigError> {
    if let Ok(value) = std::env::var(var) {
        *into = value.parse().map_err(|_| ConfigError::Env { var, value })?;
    }
    Ok(())
}

impl Config {
    /// Reads `path` when given (a missing file is an error), then applies the environment.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let mut config = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                toml::from_str(&text).map_err(|source| ConfigError::Parse {
                    path: path.to_path_buf(),
                    source,
                })?
            }
            None => Config::default(),
        };
        config.apply_env()?;
        config.check()?;
        Ok(config)
    }

    /// Refuses settings that parse but make no sense (placement would never fit anything).
    fn check(&self) -> Result<(), ConfigError> {
        let p = &self.placement;
        for (setting, value) in [
            ("placement.cpu_overcommit", p.cpu_overcommit),
            ("placement.memory_overcommit", p.memory_overcommit),
            ("placement.disk_overcommit", p.disk_overcommit),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(ConfigError::Range {
                    setting,
                    rule: "a number above 0",
                    value: value.to_string(),
                });
            }
        }
        if self.auth.token_days == 0 || self.auth.token_days > self.auth.token_max_days {
            return Err(ConfigError::Range {
                setting: "auth.token_days",
                rule: "1 to auth.token_max_days",
                value: self.auth.token_days.to_string(),
            });
        }
        if self.poller.gpu_idle_below_percent > 100 {
            return Err(ConfigError::Range {
                setting: "poller.gpu_idle_below_percent",
                rule: "0 to 100",
                value: self.poller.gpu_idle_below_percent.to_string(),
            });
        }
        if self.server.node_cert_lifetime_s < 30 {
            return Err(ConfigError::Range {
                setting: "server.node_cert_lifetime_s",
                rule: "at least 30",
                value: self.server.node_cert_lifetime_s.to_string(),
            });
        }
        if !(1..=16384).contains(&p.default_home_gib) {
            return Err(ConfigError::Range {
                setting: "placement.default_home_gib",
                rule: "1 to 16384",
                value: p.default_home_gib.to_string(),
            });
        }
        self.ldap.check()?;
        if self.database.checkout_timeout_s == 0 || self.database.prune_interval_s == 0 {
            return Err(ConfigError::Range {
                setting: "database.checkout_timeout_s / database.prune_interval_s",
                rule: "at least 1",
                value: "0".into(),
            });
        }
        self.node_calls.check()?;
        self.reclaim.check()?;
        if self.database.pool_size == 0 {
            return Err(ConfigError::Range {
                setting: "database.pool_size",
                rule: "at least 1",
                value: "0".into(),
            });
        }
        Ok(())
    }

    fn apply_env(&mut self) -> Result<(), ConfigError> {
        env_parse("DATABASE_URL", &mut self.database.url)?;
        env_parse("COHORT_DB_POOL_SIZE", &mut self.database.pool_size)?;
        env_parse(
            "COHORT_PAGE_CACHE_ENTRIES",
            &mut self.database.page_cache_entries,
        )?;
        let db = &mut self.database;
        env_parse(
            "COHORT_DB_STATEMENT_TIMEOUT_MS",
            &mut db.statement_timeout_ms,
        )?;
        env_parse("COHORT_DB_LOCK_TIMEOUT_MS", &mut db.lock_timeout_ms)?;
        env_parse(
            "COHORT_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS",
            &mut db.idle_in_transaction_timeout_ms,
        )?;
        env_parse("COHORT_DB_CONNECT_TIMEOUT_S", &mut db.connect_timeout_s)?;
        env_parse("COHORT_DB_KEEPALIVE_IDLE_S", &mut db.keepalive_idle_s)?;
        env_parse(
            "COHORT_DB_KEEPALIVE_INTERVAL_S",
            &mut db.keepalive_interval_s,
        )?;
        env_parse("COHORT_DB_KEEPALIVE_COUNT", &mut db.keepalive_count)?;
        env_parse("COHORT_DB_CHECKOUT_TIMEOUT_S", &mut db.checkout_timeout_s)?;
        env_parse("COHORT_DB_RETRIES", &mut db.retries)?;
        env_parse("COHORT_AUDIT_RETENTION_DAYS", &mut db.audit_retention_days)?;
        env_parse(
            "COHORT_OPERATION_RETENTION_DAYS",
            &mut db.operation_retention_days,
        )?;
        env_parse("COHORT_PRUNE_INTERVAL_S", &mut db.prune_interval_s)?;
        env_parse(
            "COHORT_GPU_USAGE_RETENTION_DAYS",
            &mut db.gpu_usage_retention_days,
        )?;
        env_parse("COHORT_LISTEN", &mut self.server.listen)?;
        env_parse("COHORT_STATE_DIR", &mut self.server.state_dir)?;
        if let Ok(dir) = std::env::var("COHORT_DATA_DIR") {
            self.server.data_dir = Some(PathBuf::from(dir));
        }
        env_parse("COHORT_DATA_QUOTA_MIB", &mut self.server.data_quota_mib)?;
        if let Ok(dir) = std::env::var("COHORT_ARCHIVE_DIR") {
            self.server.archive_dir = Some(PathBuf::from(dir));
        }
        env_parse("COHORT_ARCHIVE_DAYS", &mut self.server.archive_days)?;
        env_parse("COHORT_ARCHIVE_SWEEP_S", &mut self.server.archive_sweep_s)?;
        if self.server.archive_days == 0 || self.server.archive_sweep_s == 0 {
            return Err(ConfigError::Range {
                setting: "server.archive_days / server.archive_sweep_s",
                rule: "at least 1",
                value: "0".into(),
            });
        }
        env_parse(
            "COHORT_NODE_CERT_LIFETIME_S",
            &mut self.server.node_cert_lifetime_s,
        )?;
        if let Ok(listen) = std::env::var("COHORT_LXD_LISTEN") {
            self.server.lxd_listen = Some(listen.parse().map_err(|_| ConfigError::Env {
                var: "COHORT_LXD_LISTEN",
                value: listen.clone(),
            })?);
        }
        if let Ok(address) = std::env::var("COHORT_LXD_ADDRESS") {
            self.server.lxd_address = Some(address);
        }
        env_parse("COHORT_LXD_TRUST_DAYS", &mut self.server.lxd_trust_days)?;
        if self.server.lxd_trust_days == 0 {
            return Err(ConfigError::Env {
                var: "COHORT_LXD_TRUST_DAYS",
                value: "0".into(),
            });
        }
        if let Ok(domain) = std::env::var("COHORT_NOTEBOOK_DOMAIN") {
            let domain = domain.trim().trim_matches('.').to_ascii_lowercase();
            let label_ok = |l: &str| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            };
            if !domain.split('.').all(label_ok) {
                return Err(ConfigError::Env {
                    var: "COHORT_NOTEBOOK_DOMAIN",
                    value: domain,
                });
            }
            self.server.notebook_domain = domain;
        }
        if let Ok(url) = std::env::var("COHORT_PUBLIC_URL") {
            self.server.public_url = Some(url);
        }
        if let Ok(names) = std::env::var("COHORT_SERVER_NAMES") {
            self.server.server_names = names
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect();
        }
        env_parse("COHORT_POLL_INTERVAL_S", &mut self.poller.interval_s)?;
        env_parse("COHORT_OFFLINE_AFTER_S", &mut self.poller.offline_after_s)?;
        env_parse("COHORT_STARTUP_GRACE_S", &mut self.poller.startup_grace_s)?;
        env_parse("COHORT_DRIFT_POLICY", &mut self.poller.drift)?;
        env_parse(
            "COHORT_POLL_PAUSE_AFTER_LISTING_MS",
            &mut self.poller.pause_after_listing_ms,
        )?;
        env_parse(
            "COHORT_GPU_IDLE_BELOW_PERCENT",
            &mut self.poller.gpu_idle_below_percent,
        )?;
        env_parse("COHORT_CPU_OVERCOMMIT", &mut self.placement.cpu_overcommit)?;
        env_parse(
            "COHORT_MEMORY_OVERCOMMIT",
            &mut self.placement.memory_overcommit,
        )?;
        env_parse(
            "COHORT_DEFAULT_PROCESSES",
            &mut self.placement.default_processes,
        )?;
        env_parse(
            "COHORT_DEFAULT_HOME_GIB",
            &mut self.placement.default_home_gib,
        )?;
        env_parse(
            "COHORT_DISK_OVERCOMMIT",
            &mut self.placement.disk_overcommit,
        )?;
        env_parse("COHORT_LEASE_S", &mut self.worker.lease_s)?;
        env_parse("COHORT_ITEMS_PER_NODE", &mut self.worker.items_per_node)?;
        env_parse("COHORT_RECLAIM_INTERVAL_S", &mut self.reclaim.interval_s)?;
        env_parse("COHORT_RECLAIM_MINUTE_S", &mut self.reclaim.minute_s)?;
        env_parse("COHORT_GPU_LEASE_HOUR_S", &mut self.reclaim.lease_hour_s)?;
        env_parse("COHORT_JOB_INTERVAL_S", &mut self.reclaim.job_interval_s)?;
        env_parse(
            "COHORT_DELETE_AFTER_END_S",
            &mut self.reclaim.delete_after_end_s,
        )?;
        env_parse(
            "COHORT_RECLAIM_BUSY_CPU_PERCENT",
            &mut self.reclaim.busy_cpu_percent,
        )?;
        env_parse("COHORT_FILE_LIMIT_MIB", &mut self.limits.file_mib)?;
        env_parse(
            "COHORT_EXEC_OUTPUT_LIMIT_MIB",
            &mut self.limits.exec_output_mib,
        )?;
        env_parse("COHORT_TOKEN_DAYS", &mut self.auth.token_days)?;
        env_parse("COHORT_TOKEN_MAX_DAYS", &mut self.auth.token_max_days)?;
        env_parse(
            "COHORT_AUTH_FAILURES_PER_MINUTE",
            &mut self.auth.failures_per_minute,
        )?;
        env_parse(
            "COHORT_AUTH_FAILURE_SOURCES",
            &mut self.auth.failure_sources,
        )?;
        env_parse("COHORT_SESSION_MINUTES", &mut self.auth.session_minutes)?;
        env_parse(
            "COHORT_SIGN_IN_SOURCE_FAILURES_PER_MINUTE",
            &mut self.auth.sign_in_source_failures_per_minute,
        )?;
        env_parse(
            "COHORT_AUDIT_FAILURES_PER_MINUTE",
            &mut self.auth.audit_failures_per_minute,
        )?;
        if let Ok(token) = std::env::var("COHORT_METRICS_TOKEN") {
            self.auth.metrics_token = Some(token).filter(|t| !t.is_empty());
        }
        self.apply_ldap_env()?;
        let agent = &mut self.node_calls;
        env_parse(
            "COHORT_NODE_CONNECT_TIMEOUT_S",
            &mut agent.connect_timeout_s,
        )?;
        env_parse(
            "COHORT_NODE_REQUEST_TIMEOUT_S",
            &mut agent.request_timeout_s,
        )?;
        env_parse("COHORT_NODE_DAEMON_TIMEOUT_S", &mut agent.daemon_timeout_s)?;
        env_parse(
            "COHORT_NODE_TRANSFER_TIMEOUT_S",
            &mut agent.transfer_timeout_s,
        )?;
        if let Ok(id) = std::env::var("COHORT_WORKER_ID") {
            self.worker.id = Some(id);
        }
        env_parse("COHORT_MAX_CLOCK_SKEW_S", &mut self.server.max_clock_skew_s)?;
        if let Ok(name) = std::env::var("COHORT_TEST_KILL_LOOP") {
            self.server.test_kill_loop = Some(name).filter(|n| !n.is_empty());
        }
        Ok(())
    }

    fn apply_ldap_env(&mut self) -> Result<(), ConfigError> {
        let ldap = &mut self.ldap;
        for (var, field) in [
            ("COHORT_LDAP_URL", &mut ldap.url),
            ("COHORT_LDAP_USER_DN", &mut ldap.user_dn),
            ("COHORT_LDAP_BIND_DN", &mut ldap.bind_dn),
            ("COHORT_LDAP_BIND_PASSWORD", &mut ldap.bind_password),
            ("COHORT_LDAP_INSTRUCTOR_GROUP", &mut ldap.instructor_group),
            ("COHORT_LDAP_ADMIN_GROUP", &mut ldap.admin_group),
        ] {
            if let Ok(value) = std::env::var(var) {
                *field = Some(value).filter(|v| !v.is_empty());
            }
        }
        env_parse("COHORT_LDAP_STARTTLS", &mut ldap.starttls)?;
        env_parse("COHORT_LDAP_CA_FILE", &mut ldap.ca_file)?;
        env_parse("COHORT_LDAP_SEARCH_BASE", &mut ldap.search_base)?;
        env_parse("COHORT_LDAP_USER_FILTER", &mut ldap.user_filter)?;
        env_parse("COHORT_LDAP_TIMEOUT_S", &mut ldap.timeout_s)?;
        Ok(())
    }

    /// The URL written into join tokens.
    pub fn public_url(&self) -> String {
        self.server
            .public_url
            .clone()
            .unwrap_or_else(|| format!("https://{}", self.server.listen))
    }

    /// `host:port` of the LXD-style API as clients reach it, written into trust tokens and
    /// `GET /1.0`: `COHORT_LXD_ADDRESS`, else the listen address, except that a wildcard one
    /// (`0.0.0.0`, `::`, what the packages listen on) takes the public URL's host, since no
    /// client can dial a wildcard. None when the API is not served.
    pub fn lxd_address(&self) -> Option<String> {
        if let Some(address) = &self.server.lxd_address {
            return Some(address.clone());
        }
        let listen = self.server.lxd_listen?;
        if !listen.ip().is_unspecified() {
            return Some(listen.to_string());
        }
        let public = self.public_url();
        let authority = public
            .split_once("://")
            .map_or(public.as_str(), |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or_default();
        let host = match authority.rsplit_once(':') {
            Some((host, port)) if port.parse::<u16>().is_ok() => host,
            _ => authority,
        };
        Some(format!("{host}:{}", listen.port()))
    }

    /// The origin a container's JupyterLab is served on: its own host name under the notebook
    /// domain, on the port of the public URL (the listener that serves the portal).
    pub fn notebook_origin(&self, instance: &str) -> String {
        let public = self.public_url();
        let authority = public
            .split_once("://")
            .map_or(public.as_str(), |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or_default();
        let port = authority
            .rsplit_once(':')
            .filter(|(host, _)| !host.ends_with(']') || authority.ends_with(']'))
            .and_then(|(_, port)| port.parse::<u16>().ok());
        let suffix = match port {
            Some(443) | None => String::new(),
            Some(port) => format!(":{port}"),
        };
        format!("https://{instance}.{}{suffix}", self.server.notebook_domain)
    }

    /// This process's worker name.
    pub fn worker_id(&self) -> String {
        self.worker.id.clone().unwrap_or_else(|| {
            let host = nix_hostname().unwrap_or_else(|| "controller".into());
            format!("{host}-{}", std::process::id())
        })
    }
}

fn nix_hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
}

#[cfg(test)]
mod overcommit_tests {
    use super::*;

    #[test]
    fn overcommit_must_be_above_zero() {
        let mut config = Config::default();
        assert!(config.check().is_ok());
        config.placement.disk_overcommit = 0.0;
        let err = config.check().unwrap_err().to_string();
        assert!(err.contains("placement.disk_overcommit"), "{err}");
        config.placement.disk_overcommit = 1.0;
        config.placement.cpu_overcommit = f64::NAN;
        assert!(config.check().is_err());
    }

    #[test]
    fn a_directory_is_reached_only_over_tls_and_can_find_users() {
        let mut config = Config::default();
        config.ldap.url = Some("ldap://dir.uni.edu".into());
        config.ldap.user_dn = Some("uid={username},ou=people,dc=uni,dc=edu".into());
        let err = config.check().unwrap_err().to_string();
        assert!(err.contains("ldap.url"), "{err}");
        config.ldap.starttls = true;
        assert!(config.check().is_ok());
        config.ldap.url = Some("ldaps://dir.uni.edu".into());
        config.ldap.user_dn = Some("uid=someone,dc=uni,dc=edu".into());
        let err = config.check().unwrap_err().to_string();
        assert!(err.contains("ldap.user_dn"), "{err}");
        config.ldap.user_dn = None;
        let err = config.check().unwrap_err().to_string();
        assert!(err.contains("ldap.search_base"), "{err}");
        config.ldap.search_base = "ou=people,dc=uni,dc=edu".into();
        assert!(config.check().is_ok());
    }

    #[test]
    fn node_call_deadlines_are_at_least_a_second() {
        let mut config = Config::default();
        assert_eq!(config.node_calls.request_timeout_s, 30);
        config.node_calls.request_timeout_s = 0;
        let err = config.check().unwrap_err().to_string();
        assert!(err.contains("node_calls.request_timeout_s"), "{err}");
    }

    #[test]
    fn the_pool_is_two_connections_a_core_plus_two_and_never_empty() {
        let cores = std::thread::available_parallelism().unwrap().get() as u32;
        let mut config = Config::default();
        assert_eq!(config.database.pool_size, cores * 2 + 2);
        config.database.pool_size = 0;
        let err = config.check().unwrap_err().to_string();
        assert!(err.contains("database.pool_size"), "{err}");
    }
}

/// Issue 46: the packages serve the LXD-style API by default, on a port of its own, and the
/// trust tokens it prints name an address a client can dial.
#[cfg(test)]
mod lxd_api_tests {
    use super::*;

    #[test]
    fn the_packaged_configuration_serves_the_lxd_api_on_its_own_port() {
        let shipped =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/debian/controller.toml");
        let config: Config = toml::from_str(&std::fs::read_to_string(shipped).unwrap()).unwrap();
        let lxd = config
            .server
            .lxd_listen
            .expect("the package serves the LXD-style API");
        assert_eq!(lxd.port(), 8444);
        assert_ne!(lxd.port(), config.server.listen.port());
    }

    #[test]
    fn a_wildcard_listener_is_reached_at_the_public_host() {
        let mut config = Config::default();
        assert_eq!(config.lxd_address(), None);
        config.server.lxd_listen = Some("127.0.0.1:8444".parse().unwrap());
        assert_eq!(config.lxd_address().as_deref(), Some("127.0.0.1:8444"));
        config.server.lxd_listen = Some("0.0.0.0:8444".parse().unwrap());
        config.server.public_url = Some("https://lab.example.edu:8443/".into());
        assert_eq!(
            config.lxd_address().as_deref(),
            Some("lab.example.edu:8444")
        );
        config.server.public_url = Some("https://[2001:db8::1]".into());
        assert_eq!(config.lxd_address().as_deref(), Some("[2001:db8::1]:8444"));
        config.server.lxd_address = Some("lxd.example.edu:443".into());
        assert_eq!(config.lxd_address().as_deref(), Some("lxd.example.edu:443"));
    }
}
