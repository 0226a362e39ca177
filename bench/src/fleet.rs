//! Benchmark 7: the controller at a thousand nodes. A real `cohort-controller serve` process
//! polls `agents` simulated agents at its default interval. Each is enrolled as a real agent is
//! (a join token from the API, `cohort_agent::enroll::join`: its own key, a certificate from
//! the controller's CA) and serves the agent API over mutual TLS with the agent's own TLS setup
//! (`cohort_agent::tls::server_config`: only the controller's client certificate is accepted),
//! answering `GET /v1/inventory` and `GET /v1/instances` like a node with `containers` running
//! containers and four GPUs, whose rows the database holds. Measured over `seconds` once every
//! agent has been polled: the controller's CPU (% of one core) and peak resident memory, and
//! each poll's lateness (the time since the agent's previous poll, less the interval).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use cohort_agent::identity::{Identity, IdentityFiles};
use cohort_proto::agent::{
    GpuAttachment, GpuInventory, HostFacts, Image, Instance, InstanceState, Inventory, Limits,
    LxdFacts,
};
use diesel::connection::SimpleConnection;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;

use crate::api::cpu_seconds;

/// The image every simulated node holds.
const FINGERPRINT: &str = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

pub struct Outcome {
    pub interval_s: u64,
    pub seconds: f64,
    pub controller_cpu_percent: f64,
    pub controller_rss_mib: f64,
    pub generator_cpu_percent: f64,
    pub polls: usize,
    pub lateness_p99_s: f64,
    pub lateness_max_s: f64,
    /// Requests for anything but the inventory and the instance list.
    pub other_requests: u64,
    /// Instances with GPU time accounted (rows of `gpu_usage_hours`), and their allocated
    /// GPU-seconds in all: proof that the accounting ran when containers hold GPUs.
    pub accounted_instances: i64,
    pub allocated_gpu_seconds: f64,
}

/// What `gpu_usage_hours` holds after the run.
fn accounted(url: &str) -> Result<(i64, f64)> {
    use diesel::{Connection, QueryableByName, RunQueryDsl};
    #[derive(QueryableByName)]
    struct Sum {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
        #[diesel(sql_type = diesel::sql_types::Double)]
        allocated: f64,
    }
    let mut conn = diesel::PgConnection::establish(url)?;
    let sum: Sum = diesel::sql_query(
        "SELECT count(DISTINCT instance_id) AS n, coalesce(sum(allocated_s), 0)::float8 AS allocated
         FROM gpu_usage_hours",
    )
    .get_result(&mut conn)?;
    Ok((sum.n, sum.allocated))
}

/// What one simulated agent answers, serialised once, and when it was asked for its inventory.
struct Agent {
    inventory: Bytes,
    instances: Bytes,
    polled: Mutex<Vec<Instant>>,
}

fn node_name(i: u32) -> String {
    format!("sim-{i:04}")
}

fn instance_name(i: u32, c: u32) -> String {
    format!("{}-c{c:02}", node_name(i))
}

/// The answers of node `i`: a GPU server with `containers` running containers, of which the
/// first `gpu_containers` each hold one of its four GPUs and run a process on it at 50 %.
fn agent(i: u32, containers: u32, gpu_containers: u32) -> Result<Agent> {
    let gpu_of = |c: u32| format!("GPU-{i:04}-{}", c % 4);
    let name = node_name(i);
    let inventory = Inventory {
        node_name: name.clone(),
        host: HostFacts {
            hostname: name.clone(),
            kernel: "6.1.0".into(),
            cores: 64,
            memory_bytes: 512 << 30,
            disk_free_bytes: 3 << 40,
            disk_total_bytes: 4 << 40,
        },
        lxd: LxdFacts {
            daemon: "lxd".into(),
            version: "5.0.2".into(),
            project: "default".into(),
            storage_pool: "cohort".into(),
            storage_driver: "btrfs".into(),
            pool_used_bytes: 1 << 40,
            pool_total_bytes: 4 << 40,
        },
        gpus: serde_json::from_value::<GpuInventory>(json!({
            "driver_version": "550.54.15",
            "gpus": (0..4).map(|g| json!({
                "uuid": format!("GPU-{i:04}-{g}"), "index": g, "name": "NVIDIA A100 80GB PCIe",
                "memory_total_bytes": 85_899_345_920u64, "memory_used_bytes": 1u64 << 30,
                "pci_address": format!("0000:{:02x}:00.0", g + 1), "utilization_percent": 10,
                "mig_enabled": false, "mig_devices": []
            })).collect::<Vec<_>>(),
            "instances": (0..gpu_containers.min(containers)).map(|c| json!({
                "instance": instance_name(i, c),
                "gpus": [{"uuid": gpu_of(c), "utilization_percent": 50,
                          "memory_used_bytes": 2u64 << 30, "processes": 1}]
            })).collect::<Vec<_>>()
        }))?,
        nvidia_runtime: true,
        images: vec![Image {
            fingerprint: FINGERPRINT.into(),
            aliases: vec!["bench/base".into()],
            description: "bench".into(),
            size_bytes: 300 << 20,
            gpu_ready: true,
        }],
        network: None,
    };
    let instances: Vec<Instance> = (0..containers)
        .map(|c| Instance {
            name: instance_name(i, c),
            status: "Running".into(),
            idempotency_key: None,
            limits: Some(Limits {
                cpu: 2,
                memory_mib: 4096,
                disk_gib: 20,
            }),
            gpus: if c < gpu_containers {
                vec![GpuAttachment {
                    uuid: gpu_of(c),
                    pci_address: Some(format!("0000:{:02x}:00.0", c % 4 + 1)),
                    mig_uuid: None,
                    memory_cap_bytes: None,
                }]
            } else {
                Vec::new()
            },
            ssh_port: Some(20000 + c as u16),
            ssh_listen: Some("127.0.0.1".into()),
            address: None,
            ssh_host_key: None,
            created_at: None,
            ssh_ready: true,
            state: Some(InstanceState {
                processes: 40,
                cpu_usage_ns: 1_000_000_000,
                memory_bytes: 200 << 20,
                disk_bytes: 1 << 30,
            }),
            config: BTreeMap::new(),
            devices: BTreeMap::new(),
        })
        .collect();
    Ok(Agent {
        inventory: Bytes::from(serde_json::to_vec(&inventory)?),
        instances: Bytes::from(serde_json::to_vec(&instances)?),
        polled: Mutex::new(Vec::new()),
    })
}

/// Serves one simulated agent on `listener` until the runtime ends.
async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    agent: Arc<Agent>,
    other: Arc<AtomicU64>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    while let Ok((tcp, _)) = listener.accept().await {
        let (acceptor, agent, other) = (acceptor.clone(), agent.clone(), other.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let (agent, other) = (agent.clone(), other.clone());
                async move {
                    let body = match req.uri().path() {
                        "/v1/inventory" => {
                            agent
                                .polled
                                .lock()
                                .expect("poll times")
                                .push(Instant::now());
                            Some(agent.inventory.clone())
                        }
                        "/v1/instances" => Some(agent.instances.clone()),
                        _ => None,
                    };
                    let resp = match body {
                        Some(b) => hyper::Response::builder()
                            .header("content-type", "application/json")
                            .body(Full::new(b)),
                        None => {
                            other.fetch_add(1, Ordering::Relaxed);
                            hyper::Response::builder()
                                .status(404)
                                .body(Full::new(Bytes::from_static(b"{}")))
                        }
                    };
                    Ok::<_, Infallible>(resp.expect("response"))
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Resident memory of process `pid` in MiB (`VmRSS`).
fn rss_mib(pid: u32) -> Option<f64> {
    cohort_e2e::observe::proc_status_kib(pid, "VmRSS").map(|kib| kib as f64 / 1024.0)
}

/// Gives every node its `containers` instance rows, placed and running, as a provision leaves
/// them.
fn seed(url: &str, containers: u32) -> Result<()> {
    use diesel::Connection;
    let mut conn = diesel::PgConnection::establish(url)?;
    conn.batch_execute(&format!(
        "INSERT INTO users (username, role) VALUES ('fleet', 'instructor');
         INSERT INTO images (fingerprint, alias, description, gpu_ready, size_bytes)
           VALUES ('{FINGERPRINT}', 'bench/base', 'bench', true, 1);
         INSERT INTO instances (name, owner_id, image_id, node_id, ssh_port, desired_state,
                                observed_state, cpu, memory_mib, disk_gib, gpu_count,
                                gpu_share, strategy, priority, config)
           SELECT n.name || '-c' || lpad(c::text, 2, '0'), (SELECT id FROM users
                  WHERE username = 'fleet'), (SELECT id FROM images LIMIT 1), n.id, 20000 + c,
                  'running', 'running', 2, 4096, 20, 0, 'shared', 'spread', 0, '{{}}'
           FROM nodes n, generate_series(0, {last}) AS c;
         ",
        last = containers as i64 - 1,
    ))?;
    conn.batch_execute("VACUUM ANALYZE")
        .context("vacuum the seeded fleet")
}

pub fn run(agents: u32, containers: u32, seconds: u64, gpu_containers: u32) -> Result<Outcome> {
    let interval_s = cohort_controller::app::config::PollerConfig::default().interval_s;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        // The harness polls every second for tests; a deployment polls at the default.
        let every = interval_s.to_string();
        let env = [
            ("RUST_LOG", "warn"),
            ("COHORT_POLL_INTERVAL_S", every.as_str()),
        ];
        let cluster = Arc::new(cohort_e2e::cluster::Cluster::start_with_env(0, &env).await);
        let ca_pem = std::fs::read(cluster.state.path().join("controller/ca.crt"))?;
        let states = tempfile::tempdir()?;
        let other = Arc::new(AtomicU64::new(0));
        let mut fleet = Vec::new();
        let mut joins = tokio::task::JoinSet::new();
        for i in 0..agents {
            // An OS-chosen port: no block to claim, and nothing else can take it while bound.
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            let (cluster, dir) = (cluster.clone(), states.path().join(node_name(i)));
            joins.spawn(async move {
                let issued = cluster
                    .admin(
                        reqwest::Method::POST,
                        "/nodes/tokens",
                        Some(json!({"node_name": node_name(i), "addresses": ["127.0.0.1"]})),
                    )
                    .await;
                let token = issued["token"].as_str().context("join token")?.to_string();
                let opts = cohort_agent::enroll::JoinOptions {
                    state_dir: dir,
                    listen: addr,
                    agent_url: format!("https://{addr}"),
                    ssh_host: "127.0.0.1".into(),
                    ssh_port_first: 20000,
                    ssh_port_last: 29999,
                    lxd_project: None,
                    storage_pool: None,
                    lxd_socket: None,
                };
                let config = cohort_agent::enroll::join(&token, &opts).await?;
                let files = IdentityFiles {
                    key: config.key_path(),
                    cert: config.cert_path(),
                };
                anyhow::Ok((i, listener, Identity::load(files, &node_name(i))?))
            });
            // A few enrollments at a time: each is a key, a CSR and two requests.
            while joins.len() >= 8 {
                fleet.push(joins.join_next().await.context("join task")???);
            }
        }
        while let Some(joined) = joins.join_next().await {
            fleet.push(joined??);
        }
        seed(&cluster.db_url, containers)?;
        let mut served = Vec::new();
        for (i, listener, identity) in fleet {
            let tls = Arc::new(cohort_agent::tls::server_config(
                Arc::new(identity),
                &ca_pem,
            )?);
            let agent = Arc::new(agent(i, containers, gpu_containers)?);
            tokio::spawn(serve(listener, tls, agent.clone(), other.clone()));
            served.push(agent);
        }
        // Until every agent has been polled once (the controller's first rounds also enroll and
        // record each node's GPUs and images).
        let warm_deadline = Instant::now() + Duration::from_secs(interval_s * 12 + 60);
        while served
            .iter()
            .any(|a| a.polled.lock().expect("poll times").is_empty())
        {
            ensure!(
                Instant::now() < warm_deadline,
                "some agents were never polled"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        tokio::time::sleep(Duration::from_secs(interval_s)).await;

        let pid = cluster.controller.pid();
        let me = std::process::id();
        let (start, cpu0, own0) = (
            Instant::now(),
            cpu_seconds(pid).context("controller CPU")?,
            cpu_seconds(me).context("own CPU")?,
        );
        let mut rss: f64 = 0.0;
        while start.elapsed() < Duration::from_secs(seconds) {
            rss = rss.max(rss_mib(pid).context("controller memory")?);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let (end, cpu1, own1) = (
            Instant::now(),
            cpu_seconds(pid).context("controller CPU")?,
            cpu_seconds(me).context("own CPU")?,
        );
        let wall = end.duration_since(start).as_secs_f64();

        // Each poll in the window against the agent's poll before it; an agent not polled
        // since is as late as the time since its last poll.
        let interval = interval_s as f64;
        let mut late = Vec::new();
        for a in &served {
            let times = a.polled.lock().expect("poll times").clone();
            for pair in times.windows(2).filter(|p| p[1] >= start && p[1] <= end) {
                late.push(pair[1].duration_since(pair[0]).as_secs_f64() - interval);
            }
            if let Some(last) = times.last() {
                late.push(end.saturating_duration_since(*last).as_secs_f64() - interval);
            }
        }
        late.sort_by(f64::total_cmp);
        let polls = late.len() - served.len();
        ensure!(polls > 0, "no polls in the window");
        let (accounted_instances, allocated_gpu_seconds) = accounted(&cluster.db_url)?;
        ensure!(
            (accounted_instances > 0) == (gpu_containers > 0),
            "{accounted_instances} instances accounted with {gpu_containers} GPU containers a node"
        );
        let log = cluster.controller_log();
        let errors = log.lines().filter(|l| l.contains("ERROR")).count();
        ensure!(errors == 0, "the controller logged {errors} errors");
        Ok(Outcome {
            interval_s,
            seconds: wall,
            controller_cpu_percent: (cpu1 - cpu0) / wall * 100.0,
            controller_rss_mib: rss,
            generator_cpu_percent: (own1 - own0) / wall * 100.0,
            polls,
            lateness_p99_s: late[((late.len() - 1) as f64 * 0.99).round() as usize].max(0.0),
            lateness_max_s: late.last().copied().unwrap_or_default().max(0.0),
            other_requests: other.load(Ordering::Relaxed),
            accounted_instances,
            allocated_gpu_seconds,
        })
    })
}
