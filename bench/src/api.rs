//! Benchmark 3: API latency. A real `cohort-controller serve` process over TLS on loopback with a
//! large inventory seeded straight into its database, then `connections` concurrent clients
//! asking for one page of `GET /api/v1/instances` for a bounded time. The baseline in the same
//! run is `/healthz` under the same load: the floor of the HTTP and TLS stack on this machine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use diesel::connection::SimpleConnection;

pub struct Outcome {
    pub requests: usize,
    pub errors: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub baseline_p99_ms: f64,
    /// CPU time per answered page request, in milliseconds: the controller's, and PostgreSQL's
    /// (every `postgres` process). Unlike latency, this hardly moves with the machine's load.
    pub controller_cpu_ms: f64,
    pub postgres_cpu_ms: f64,
    /// The load generator's own (this process).
    pub client_cpu_ms: f64,
    /// Writes made to the inventory while the pages were read, and the pages the controller
    /// served again unchanged / read afresh meanwhile (`cohort_controller_instance_pages_total`).
    pub writes: u64,
    pub pages_hit: u64,
    pub pages_read: u64,
}

/// CPU seconds (user and system) a process has used, from `/proc/<pid>/stat`.
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces:
    // state is field 3, utime 14 and stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100);
    Some(ticks as f64 / hz as f64)
}

/// CPU seconds of every `postgres` process on the machine (the server, its backends and its
/// background workers).
fn postgres_cpu_seconds() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "postgres")
        })
        .filter_map(cpu_seconds)
        .sum()
}

/// Seeds `instances` placed instances over 100 nodes (a node per 100 instances past 10,000, so
/// 100,000 fit the nodes' ports and GPU slots), one in four with a GPU slot.
fn seed(url: &str, instances: u32) -> Result<()> {
    use diesel::Connection;
    let mut conn = diesel::PgConnection::establish(url)?;
    let nodes = instances.div_ceil(100).max(100);
    conn.batch_execute(&format!(
        "INSERT INTO users (username, role) SELECT 'u' || n, 'student'
           FROM generate_series(1, {instances}) AS n;
         INSERT INTO images (fingerprint, alias, description, gpu_ready, size_bytes)
           VALUES (repeat('b', 64), 'bench/base', 'bench', true, 1);
         INSERT INTO nodes (name, agent_url, ssh_host, ssh_port_first, ssh_port_last, state,
                            cores, memory_bytes, disk_total_bytes, disk_free_bytes, nvidia_runtime)
           SELECT 'sim-' || n, 'https://127.0.0.1:1', '127.0.0.1', 20000, 21000, 'cordoned',
                  256, 2199023255552, 109951162777600, 109951162777600, true
           FROM generate_series(1, {nodes}) AS n;
         INSERT INTO gpus (node_id, uuid, idx, model, memory_bytes, pci_address, share_limit,
                           present)
           SELECT nodes.id, 'GPU-' || nodes.id || '-' || g, g, 'NVIDIA H100 80GB HBM3',
                  85899345920, '0000:0' || g || ':00.0', 64, true
           FROM nodes, generate_series(0, 7) AS g;
         INSERT INTO instances (name, owner_id, image_id, node_id, ssh_port, desired_state,
                                observed_state, cpu, memory_mib, disk_gib, gpu_count,
                                gpu_share, strategy, priority, config)
           SELECT 'inst-' || lpad(u.id::text, 6, '0'), u.id, (SELECT id FROM images LIMIT 1),
                  (SELECT min(id) FROM nodes) + u.id % {nodes},
                  20000 + u.id / {nodes}, 'running', 'running', 2, 4096, 20,
                  CASE WHEN u.id % 4 = 0 THEN 1 ELSE 0 END, 'shared', 'spread', 0, '{{}}'
           FROM users u WHERE u.role = 'student';
         INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id)
           SELECT g.id, g.share_limit, (i.ssh_port - 20000) / 8, i.id
           FROM instances i JOIN gpus g
             ON g.node_id = i.node_id AND g.idx = (i.ssh_port - 20000) % 8
           WHERE i.gpu_count = 1;
         "
    ))
    .context("seed the inventory")?;
    // One transaction wrote every instance, so each node's counters (see the
    // `placement_counters` migration) went through as many row versions; a deployment's
    // autovacuum clears those long before a page is read. VACUUM runs alone, outside the
    // transaction a batch of statements is.
    conn.batch_execute("VACUUM ANALYZE")
        .context("vacuum the seeded inventory")
}

/// Writes to the inventory at `per_second` until `deadline`, as a fleet's polls do: each a
/// node's heartbeat (`nodes.last_heartbeat_at`), the nodes in turn. Returns how many it made.
fn write_heartbeats(url: &str, per_second: u32, deadline: Instant) -> Result<u64> {
    use diesel::Connection;
    if per_second == 0 {
        return Ok(0);
    }
    let mut conn = diesel::PgConnection::establish(url)?;
    let every = Duration::from_secs(1) / per_second;
    let (start, mut made) = (Instant::now(), 0u64);
    while Instant::now() < deadline {
        conn.batch_execute(&format!(
            "UPDATE nodes SET last_heartbeat_at = now() WHERE name = 'sim-{}'",
            made % 100 + 1
        ))?;
        made += 1;
        let due = start + every * made as u32;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
    }
    Ok(made)
}

/// A counter of the controller's `/metrics` by its series (name and labels), read with an admin's
/// `token`.
async fn counter(client: &reqwest::Client, base: &str, token: &str, series: &str) -> Result<u64> {
    let text = client
        .get(format!("{base}/metrics"))
        .bearer_auth(token)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(Ok(0), |n| n.trim().parse::<f64>().map(|n| n as u64))?)
}

/// Latencies in milliseconds of every answered request, and the number of errors.
async fn load(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    connections: u32,
    seconds: u64,
) -> (Vec<f64>, usize) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            let client = client.clone();
            let url = url.to_string();
            let token = token.to_string();
            tokio::spawn(async move {
                let (mut lat, mut errors) = (Vec::new(), 0usize);
                while Instant::now() < deadline {
                    let t = Instant::now();
                    let res = client.get(&url).bearer_auth(&token).send().await;
                    match res {
                        Ok(r) if r.status().is_success() => {
                            if r.bytes().await.is_ok() {
                                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                            } else {
                                errors += 1;
                            }
                        }
                        _ => errors += 1,
                    }
                }
                (lat, errors)
            })
        })
        .collect();
    let (mut all, mut errors) = (Vec::new(), 0);
    for t in tasks {
        let (lat, e) = t.await.expect("load task");
        all.extend(lat);
        errors += e;
    }
    all.sort_by(f64::total_cmp);
    (all, errors)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

/// `page` instances per request; 0 asks for the whole list (no `limit`). `writes_per_second`
/// inventory writes run alongside the page requests.
pub fn run(
    instances: u32,
    connections: u32,
    seconds: u64,
    page: u32,
    writes_per_second: u32,
) -> Result<Outcome> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        // The simulated nodes have no agent: poll them rarely, or the poller's failed polls
        // would be part of what is measured. Log as a deployment would, at info.
        let cluster = cohort_e2e::cluster::Cluster::start_with_env(
            0,
            &[("COHORT_POLL_INTERVAL_S", "3600"), ("RUST_LOG", "info")],
        )
        .await;
        seed(&cluster.db_url, instances)?;
        let ca = std::fs::read(cluster.state.path().join("controller/ca.crt"))?;
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca)?)
            .pool_max_idle_per_host(connections as usize)
            .timeout(Duration::from_secs(30))
            .build()?;
        let base = cluster.controller.url();
        let token = Arc::new(cluster.admin_token.clone());
        let (page_url, expected) = match page {
            0 => (format!("{base}/api/v1/instances"), instances),
            n => (
                format!("{base}/api/v1/instances?limit={n}"),
                n.min(instances),
            ),
        };
        // The page must really hold the instances of the seeded inventory it should.
        let first: Vec<serde_json::Value> = client
            .get(&page_url)
            .bearer_auth(token.as_str())
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        ensure!(
            first.len() == expected as usize,
            "a page held {} instances, expected {expected}",
            first.len()
        );
        // Warm up both routes, then measure the baseline and the route.
        let _ = load(&client, &page_url, &token, connections, 2).await;
        let health = format!("{base}/healthz");
        let (base_lat, base_err) = load(&client, &health, &token, connections, seconds).await;
        ensure!(base_err == 0, "{base_err} /healthz requests failed");
        let pid = cluster.controller.pid();
        let me = std::process::id();
        let cpu = || -> Result<(f64, f64, f64)> {
            Ok((
                cpu_seconds(pid).context("controller CPU time")?,
                postgres_cpu_seconds(),
                cpu_seconds(me).context("own CPU time")?,
            ))
        };
        let pages = |outcome: &'static str| {
            let (client, base, token) = (client.clone(), base.clone(), token.clone());
            async move {
                let series =
                    format!("cohort_controller_instance_pages_total{{outcome=\"{outcome}\"}}");
                counter(&client, &base, &token, &series).await
            }
        };
        let (hit0, read0) = (pages("hit").await?, pages("miss").await?);
        let db_url = cluster.db_url.clone();
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let writer = tokio::task::spawn_blocking(move || {
            write_heartbeats(&db_url, writes_per_second, deadline)
        });
        let before = cpu()?;
        let (lat, errors) = load(&client, &page_url, &token, connections, seconds).await;
        let after = cpu()?;
        let writes = writer.await??;
        let (hit1, read1) = (pages("hit").await?, pages("miss").await?);
        let per_request = |seconds: f64| seconds * 1000.0 / lat.len().max(1) as f64;
        let log = cluster.controller_log();
        let error_lines = log.lines().filter(|l| l.contains("ERROR")).count();
        ensure!(
            error_lines == 0,
            "the controller logged {error_lines} errors under load"
        );
        Ok(Outcome {
            requests: lat.len(),
            errors,
            p50_ms: percentile(&lat, 0.50),
            p99_ms: percentile(&lat, 0.99),
            baseline_p99_ms: percentile(&base_lat, 0.99),
            controller_cpu_ms: per_request(after.0 - before.0),
            postgres_cpu_ms: per_request(after.1 - before.1),
            client_cpu_ms: per_request(after.2 - before.2),
            writes,
            pages_hit: hit1 - hit0,
            pages_read: read1 - read0,
        })
    })
}
