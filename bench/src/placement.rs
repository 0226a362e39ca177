//! Benchmark 2: placement throughput. A fleet of simulated nodes (rows with GPUs, no agents) in a
//! fresh database, then placements through the controller's own placement code from two OS
//! processes at once, each with several connections. The ceiling is `pgbench`'s simple-update
//! TPS on the same server in the same run. Afterwards the database is checked for double
//! allocation: a port or a GPU slot given twice, or a GPU over its `share_limit`.

use std::process::Command;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use cohort_controller::app::config::PlacementConfig;
use cohort_controller::db::models::instance::NewInstance;
use cohort_controller::placement;
use cohort_proto::api::instances::{DesiredState, GpuShare, ObservedState, PlacementStrategy};
use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::BigInt;

/// What the parent asks of the fleet.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub nodes: u32,
    pub gpus_per_node: u32,
    pub share_limit: u32,
    pub placements: u32,
    pub processes: u32,
    pub threads: u32,
    /// Placements per transaction: 1 as `POST /instances` does, a class as a course provision
    /// does (every student of the course in one transaction).
    pub batch: u32,
}

/// Seeds the fleet: `nodes` online nodes, each with GPUs and a port range wide enough for its
/// share of the placements, one owner and one image every node holds.
pub fn seed(conn: &mut PgConnection, shape: &Shape) -> Result<()> {
    let per_node = shape.placements.div_ceil(shape.nodes) * 2;
    conn.batch_execute(&format!(
        "INSERT INTO users (username, role) VALUES ('bench', 'instructor');
         INSERT INTO images (fingerprint, alias, description, gpu_ready, size_bytes)
           VALUES (repeat('a', 64), 'bench/base', 'bench', true, 1);
         INSERT INTO nodes (name, agent_url, ssh_host, ssh_port_first, ssh_port_last, state,
                            cores, memory_bytes, disk_total_bytes, disk_free_bytes, nvidia_runtime)
           SELECT 'sim-' || n, 'https://127.0.0.1:1', '127.0.0.1', 20000, 20000 + {per_node},
                  'online', 256, 2199023255552, 109951162777600, 109951162777600, true
           FROM generate_series(1, {nodes}) AS n;
         INSERT INTO gpus (node_id, uuid, idx, model, memory_bytes, pci_address, share_limit,
                           present)
           SELECT nodes.id, 'GPU-' || nodes.id || '-' || g, g, 'NVIDIA H100 80GB HBM3',
                  85899345920, '0000:' || lpad(to_hex(g), 2, '0') || ':00.0', {share}, true
           FROM nodes, generate_series(0, {gpus} - 1) AS g;
         INSERT INTO node_images (node_id, image_id)
           SELECT nodes.id, images.id FROM nodes, images;
         ANALYZE;",
        nodes = shape.nodes,
        gpus = shape.gpus_per_node,
        share = shape.share_limit,
    ))
    .context("seed the simulated fleet")
}

/// One worker process: `threads` connections, each placing its share of `count` instances,
/// `batch` per transaction (each instance's row, port and GPU slots commit together, as in the
/// API's create and a course's provision). Prints `placed N failed M` on its last line.
pub fn worker(url: &str, worker: u32, count: u32, threads: u32, batch: u32) -> Result<()> {
    let per_thread = count.div_ceil(threads);
    let batch = batch.max(1);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let url = url.to_string();
            std::thread::spawn(move || -> Result<(u32, u32)> {
                let mut conn = PgConnection::establish(&url)?;
                let owner: i64 = diesel::sql_query("SELECT id FROM users WHERE username = 'bench'")
                    .get_result::<Id>(&mut conn)?
                    .id;
                let image: i64 = diesel::sql_query("SELECT id FROM images LIMIT 1")
                    .get_result::<Id>(&mut conn)?
                    .id;
                let config = PlacementConfig::default();
                let (mut placed, mut failed) = (0, 0);
                let mut i = 0;
                while i < per_thread {
                    let n = batch.min(per_thread - i);
                    let names: Vec<String> =
                        (i..i + n).map(|i| format!("b{worker}-{t}-{i}")).collect();
                    let outcomes = conn.transaction(|conn| {
                        if batch == 1 {
                            // Every other instance asks for a shared GPU, like a mixed class.
                            let new =
                                instance(&names[0], owner, image, i32::from(i.is_multiple_of(2)));
                            return placement::insert(conn, &new, None, &config)
                                .map(|(_, p)| vec![p]);
                        }
                        // A class asks for one shape: every other class a shared GPU each, so
                        // as many instances ask for one as one at a time.
                        let gpus = i32::from((i / batch).is_multiple_of(2));
                        let class: Vec<NewInstance<'_>> = names
                            .iter()
                            .map(|name| instance(name, owner, image, gpus))
                            .collect();
                        placement::insert_class(conn, &class, &config)
                            .map(|placed| placed.into_iter().map(|(_, p)| p).collect())
                    });
                    match outcomes {
                        Ok(all) => {
                            let ok = all.iter().filter(|p| p.is_some()).count() as u32;
                            placed += ok;
                            failed += n - ok;
                        }
                        Err(e) => bail!("placement batch at {i}: {e}"),
                    }
                    i += n;
                }
                Ok((placed, failed))
            })
        })
        .collect();
    let (mut placed, mut failed) = (0, 0);
    for h in handles {
        let (p, f) = h.join().expect("placement thread")?;
        placed += p;
        failed += f;
    }
    println!("placed {placed} failed {failed}");
    Ok(())
}

/// One benchmark instance: 2 cores, 4 GiB, 20 GiB, `gpus` shared GPUs.
fn instance<'a>(name: &'a str, owner: i64, image: i64, gpus: i32) -> NewInstance<'a> {
    NewInstance {
        name,
        owner_id: owner,
        course_id: None,
        image_id: image,
        desired_state: DesiredState::Running,
        observed_state: ObservedState::Queued,
        cpu: 2,
        memory_mib: 4096,
        disk_gib: 20,
        gpu_count: gpus,
        gpu_model: None,
        gpu_share: GpuShare::Shared,
        gpu_share_count: None,
        home_gib: 0,
        strategy: PlacementStrategy::Spread,
        priority: 0,
        config: serde_json::json!({}),
    }
}

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Result of one run.
pub struct Outcome {
    pub placed: u64,
    pub seconds: f64,
    pub pgbench_tps: f64,
}

impl Outcome {
    pub fn per_second(&self) -> f64 {
        self.placed as f64 / self.seconds
    }
}

/// Runs the whole benchmark: seed, the worker processes at once, the checks, then pgbench.
pub fn run(shape: &Shape) -> Result<Outcome> {
    let db = cohort_e2e::TestDb::new();
    let mut conn = db.connect();
    seed(&mut conn, shape)?;
    let me = std::env::current_exe()?;
    let per_process = shape.placements / shape.processes;
    let start = Instant::now();
    let children = (0..shape.processes)
        .map(|w| {
            Command::new(&me)
                .args(["placement-worker", "--url", db.url()])
                .args(["--worker", &w.to_string()])
                .args(["--count", &per_process.to_string()])
                .args(["--threads", &shape.threads.to_string()])
                .args(["--batch", &shape.batch.to_string()])
                .stdout(std::process::Stdio::piped())
                .spawn()
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let mut reported = 0u64;
    for child in children {
        let out = child.wait_with_output()?;
        ensure!(out.status.success(), "a placement worker failed");
        let text = String::from_utf8_lossy(&out.stdout);
        let last = text.lines().last().unwrap_or_default();
        let placed: u64 = last
            .strip_prefix("placed ")
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("worker printed {last:?}"))?;
        reported += placed;
    }
    let seconds = start.elapsed().as_secs_f64();
    let placed = check(&mut conn, reported)?;
    drop(conn);
    drop(db);
    let pgbench_tps = pgbench_ceiling(shape.processes * shape.threads, 20)?;
    Ok(Outcome {
        placed,
        seconds,
        pgbench_tps,
    })
}

/// Checks the invariants after the run: every instance placed at most once, no (node, port)
/// twice, no GPU over its limit, and slots only on present GPUs.
pub fn check(conn: &mut PgConnection, expected: u64) -> Result<u64> {
    let count = |conn: &mut PgConnection, sql: &str| -> Result<i64> {
        Ok(diesel::sql_query(sql).get_result::<Count>(conn)?.n)
    };
    let placed = count(
        conn,
        "SELECT count(*) AS n FROM instances WHERE node_id IS NOT NULL",
    )?;
    let distinct_ports = count(
        conn,
        "SELECT count(DISTINCT (node_id, ssh_port)) AS n FROM instances WHERE node_id IS NOT NULL",
    )?;
    ensure!(
        placed == distinct_ports,
        "{placed} placed instances but {distinct_ports} distinct (node, port) pairs"
    );
    let over = count(
        conn,
        "SELECT count(*) AS n FROM (SELECT g.id FROM gpus g JOIN gpu_allocations a \
         ON a.gpu_id = g.id GROUP BY g.id, g.share_limit HAVING count(*) > g.share_limit) x",
    )?;
    ensure!(
        over == 0,
        "{over} GPUs hold more allocations than their share_limit"
    );
    let missing_gpu = count(
        conn,
        "SELECT count(*) AS n FROM instances i WHERE i.node_id IS NOT NULL AND i.gpu_count > \
         (SELECT count(*) FROM gpu_allocations a WHERE a.instance_id = i.id)",
    )?;
    ensure!(
        missing_gpu == 0,
        "{missing_gpu} placed instances lack their GPU slots"
    );
    let foreign_gpu = count(
        conn,
        "SELECT count(*) AS n FROM gpu_allocations a JOIN gpus g ON g.id = a.gpu_id \
         JOIN instances i ON i.id = a.instance_id WHERE g.node_id <> i.node_id",
    )?;
    ensure!(
        foreign_gpu == 0,
        "{foreign_gpu} GPU slots on another node than their instance"
    );
    ensure!(
        placed as u64 == expected,
        "{placed} instances placed, expected {expected}"
    );
    Ok(placed as u64)
}

/// `pgbench` simple-update TPS against a scratch database on the same server, with as many
/// clients as the placement run had connections.
pub fn pgbench_ceiling(clients: u32, seconds: u32) -> Result<f64> {
    let db = cohort_e2e::TestDb::empty();
    let url = db.url().to_string();
    let init = Command::new("pgbench")
        .args(["-i", "-q", "-s", "10", &url])
        .output()
        .context("run pgbench (postgresql-client); scripts/setup installs it")?;
    if !init.status.success() {
        bail!("pgbench -i: {}", String::from_utf8_lossy(&init.stderr));
    }
    let out = Command::new("pgbench")
        .args(["-b", "simple-update", "-n"])
        .args(["-c", &clients.to_string(), "-j", "2"])
        .args(["-T", &seconds.to_string(), &url])
        .output()?;
    if !out.status.success() {
        bail!("pgbench: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("tps = ")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse().ok())
        })
        .with_context(|| format!("no tps line in pgbench output:\n{text}"))
}
