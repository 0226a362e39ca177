//! The controller as the library sees it: the database pool, configuration, CA and the way to
//! reach agents. Every action takes it; handlers, the worker and the poller share one.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use diesel::pg::PgConnection;
use tokio::sync::Semaphore;

use crate::accounts::auth::{Bearer, Caller};
use crate::accounts::auth_failures::AuthFailures;
use crate::accounts::failure_audit::FailureAudit;
use crate::agent_client::{AgentConnector, AgentError, AgentTarget, NodeAgent};
use crate::app::config::Config;
use crate::app::metrics::Metrics;
use crate::db::models::node::Node;
use crate::db::models::node_certificate::NodeCertificate;
use crate::db::DbPool;
use crate::error::{ActionError, ActionResult};
use crate::instances::page_cache::PageCache;
use crate::nodes::pki::Pki;
use cohort_proto::api::nodes::NodeState;

pub struct Controller {
    pub pool: DbPool,
    /// One permit per pooled connection, taken before a blocking thread is: r2d2 hands a returned
    /// connection to whichever waiting thread gets there first, so under load a few requests
    /// waited many times longer than the rest; this semaphore serves them in order of arrival,
    /// and keeps threads that could only wait for a connection from being started.
    db_turns: Arc<Semaphore>,
    pub config: Config,
    pub pki: Arc<Pki>,
    pub agents: Arc<dyn AgentConnector>,
    pub metrics: Metrics,
    pub started: Instant,
    /// Signalled when capacity may have freed, so the queue is tried at once.
    pub capacity_freed: tokio::sync::Notify,
    /// Signalled when a batch job was submitted or cancelled, so the jobs' loop passes at once.
    pub jobs_changed: tokio::sync::Notify,
    /// Pages of `GET /instances` served again while unchanged.
    pub pages: Arc<PageCache>,
    /// Failed authentications by source address, to answer 429 past the limit (the API).
    pub auth_failures: AuthFailures,
    /// The background loops' last ticks and deaths, for `/healthz`.
    pub loops: crate::app::loops::Loops,
    /// Failed portal sign-ins by source and account (`auth.failures_per_minute`)...
    pub sign_in_failures: AuthFailures<(IpAddr, String)>,
    /// ... and by source alone (`auth.sign_in_source_failures_per_minute`).
    pub sign_in_source_failures: AuthFailures<IpAddr>,
    /// Which failed authentications are written to the audit log.
    pub failure_audit: FailureAudit,
}

impl Controller {
    pub fn new(
        pool: DbPool,
        config: Config,
        pki: Arc<Pki>,
        agents: Arc<dyn AgentConnector>,
    ) -> Self {
        let metrics = Metrics::default();
        let pages = Arc::new(PageCache::new(
            config.database.page_cache_entries,
            metrics.instance_pages.clone(),
        ));
        Controller {
            auth_failures: AuthFailures::new(
                config.auth.failures_per_minute,
                config.auth.failure_sources,
            ),
            sign_in_failures: AuthFailures::new(
                config.auth.failures_per_minute,
                config.auth.failure_sources,
            ),
            sign_in_source_failures: AuthFailures::new(
                config.auth.sign_in_source_failures_per_minute,
                config.auth.failure_sources,
            ),
            failure_audit: FailureAudit::new(config.auth.audit_failures_per_minute),
            pages,
            metrics,
            db_turns: Arc::new(Semaphore::new(pool.max_size() as usize)),
            pool,
            config,
            pki,
            agents,
            started: Instant::now(),
            capacity_freed: tokio::sync::Notify::new(),
            jobs_changed: tokio::sync::Notify::new(),
            loops: Default::default(),
        }
    }

    /// How long a node's certificate lives (`COHORT_NODE_CERT_LIFETIME_S`).
    pub fn node_cert_lifetime(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.config.server.node_cert_lifetime_s)
    }

    /// Where image tarballs live: `<state_dir>/images/<fingerprint>.tar`.
    pub fn images_dir(&self) -> PathBuf {
        self.config.server.state_dir.join("images")
    }

    /// The course data store (`COHORT_DATA_DIR`).
    pub fn data_dir(&self) -> PathBuf {
        self.config
            .server
            .data_dir
            .clone()
            .unwrap_or_else(|| self.config.server.state_dir.join("data"))
    }

    /// The archive store (`COHORT_ARCHIVE_DIR`).
    pub fn archive_dir(&self) -> PathBuf {
        self.config
            .server
            .archive_dir
            .clone()
            .unwrap_or_else(|| self.config.server.state_dir.join("archives"))
    }

    /// The stored tarball of the dataset version with this SHA-256.
    pub fn dataset_tarball(&self, sha256: &str) -> PathBuf {
        self.data_dir().join(format!("{sha256}.tar"))
    }

    /// The catalog's tarball of the image with this fingerprint.
    pub fn image_tarball(&self, fingerprint: &str) -> PathBuf {
        self.images_dir().join(format!("{fingerprint}.tar"))
    }

    /// Runs diesel work on a blocking thread with a pooled connection, in turn (see `db_turns`);
    /// waiting for a turn and a connection together takes at most the pool's connection timeout.
    /// Work that fails with a deadlock or a serialization failure ([`crate::db::retryable`]) is
    /// run again (a clone of it), up to `COHORT_DB_RETRIES` times after a growing, jittered
    /// pause: each unit of work must therefore be one transaction, or steps each of which may
    /// run again.
    pub async fn db<T, F>(&self, work: F) -> ActionResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut PgConnection) -> ActionResult<T> + Clone + Send + 'static,
    {
        let retries = self.config.database.retries;
        self.run_db(retries, move |conn| work.clone()(conn)).await
    }

    /// [`Controller::db`] for work that cannot be cloned: run once, without the retry.
    pub async fn db_once<T, F>(&self, work: F) -> ActionResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut PgConnection) -> ActionResult<T> + Send + 'static,
    {
        let mut work = Some(work);
        self.run_db(0, move |conn| match work.take() {
            Some(work) => work(conn),
            None => Err(ActionError::Internal("database work run twice".into())),
        })
        .await
    }

    async fn run_db<T, F>(&self, retries: u32, mut work: F) -> ActionResult<T>
    where
        T: Send + 'static,
        F: FnMut(&mut PgConnection) -> ActionResult<T> + Send + 'static,
    {
        let deadline = Instant::now() + self.pool.connection_timeout();
        let turn = tokio::time::timeout_at(deadline.into(), self.db_turns.clone().acquire_owned())
            .await
            .ok()
            .and_then(Result::ok);
        let pool = self.pool.clone();
        tokio::task::spawn_blocking(move || {
            // Declared before the connection, so dropped after it is back in the pool.
            let _turn = turn;
            let mut conn = pool.get_timeout(deadline.saturating_duration_since(Instant::now()))?;
            let mut attempt = 0;
            loop {
                match work(&mut conn) {
                    Err(ActionError::Database(e))
                        if attempt < retries && crate::db::retryable(&e) =>
                    {
                        attempt += 1;
                        tracing::info!(error = %e, attempt, "database work retried");
                        std::thread::sleep(retry_pause(attempt));
                    }
                    other => return other,
                }
            }
        })
        .await
        .map_err(|e| ActionError::Internal(e.to_string()))?
    }

    /// Runs diesel work as the caller behind `bearer`, authenticated on the same pooled connection
    /// and blocking thread as the work.
    pub async fn db_as<T, F>(&self, bearer: Bearer, work: F) -> ActionResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut PgConnection, Caller) -> ActionResult<T> + Clone + Send + 'static,
    {
        self.db(move |conn| {
            let caller = bearer.caller(conn)?;
            work(conn, caller)
        })
        .await
    }

    /// The agent of a node (by id), pinned to its live certificate; refused at once while the
    /// node is offline ([`connect_node`]).
    pub async fn agent_by_node_id(&self, node_id: i64) -> ActionResult<(Node, Arc<dyn NodeAgent>)> {
        let agents = self.agents.clone();
        self.db(move |conn| {
            let node = Node::find(conn, node_id)?;
            let agent = connect_node(agents.as_ref(), conn, &node)?;
            Ok((node, agent))
        })
        .await
    }
}

/// The pause before the `attempt`th run of work that met a deadlock: 10 ms doubled each
/// attempt (at most 640 ms), times a random factor between 0.5 and 1.5, so the transactions
/// that deadlocked do not meet again in step.
fn retry_pause(attempt: u32) -> std::time::Duration {
    let base = 10u64 << attempt.min(6);
    let jitter = rand::random::<u64>() % (base + 1);
    std::time::Duration::from_millis(base / 2 + jitter)
}

/// The agent of a node, pinned to its live certificates (two while a renewal is unconfirmed);
/// a node whose certificates were revoked or have expired cannot be reached. A node the poller
/// has marked offline is refused at once (an [`AgentError::Offline`], which a job retries
/// later): a call to it would only hold a worker permit or a request until its deadline. The
/// poller itself reaches offline nodes through [`connect_pinned`], which is how they come back.
pub fn connect_node(
    agents: &dyn AgentConnector,
    conn: &mut PgConnection,
    node: &Node,
) -> ActionResult<Arc<dyn NodeAgent>> {
    if node.state == NodeState::Offline {
        let silent = node.last_heartbeat_at.map_or_else(
            || "the node has never answered".to_string(),
            |at| format!("the node has not answered since {}", at.to_rfc3339()),
        );
        return Err(ActionError::Agent {
            node: node.name.clone(),
            source: AgentError::Offline(format!("{silent}; its agent is not called until it does")),
        });
    }
    connect_pinned(agents, node, &NodeCertificate::live(conn, &node.name)?)
}

/// [`connect_node`] with the node's live certificates already read (the poller hands them on to
/// the renewal check).
pub fn connect_pinned(
    agents: &dyn AgentConnector,
    node: &Node,
    live: &[NodeCertificate],
) -> ActionResult<Arc<dyn NodeAgent>> {
    let pins: Vec<String> = live.iter().map(|c| c.fingerprint.clone()).collect();
    if pins.is_empty() {
        return Err(ActionError::conflict(
            None,
            format!(
                "node {} has no live certificate (revoked, or expired: join it again with a new \
                 token)",
                node.name
            ),
        ));
    }
    let target = AgentTarget {
        node_name: node.name.clone(),
        url: node.agent_url.clone(),
        pins,
    };
    agents
        .connect(&target)
        .map_err(ActionError::on_node(node.name.clone()))
}
