//! `GET /v1/metrics` (and `GET /metrics` on the optional loopback listener): the node's instances
//! by status, each container's CPU and memory (LXD's state API), each GPU's utilization, memory,
//! temperature and power (NVML), and each container's share of each GPU, found by mapping the
//! GPU's compute processes to containers through their cgroups. Prometheus text format
//! (prometheus-client). Containers are labelled `container`, never `instance`, which Prometheus
//! keeps for the scrape target.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::Response;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::error::ApiError;
use super::stream::{full, Body};
use crate::node::Node;

type Labels = Vec<(String, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The whole exposition text.
pub async fn text(node: &Node) -> Result<String, ApiError> {
    let instances = node.instances.instances().await?;
    let gpus = node.gpus.inventory().await?;
    let mut registry = Registry::with_prefix("cohort_agent");

    let by_status = Family::<Labels, Gauge>::default();
    let cpu = Family::<Labels, FloatGauge>::default();
    let memory = Family::<Labels, Gauge>::default();
    let processes = Family::<Labels, Gauge>::default();
    for i in &instances {
        by_status
            .get_or_create(&labels(&[("status", &i.status)]))
            .inc();
        if let Some(state) = &i.state {
            let l = labels(&[("container", &i.name)]);
            cpu.get_or_create(&l).set(state.cpu_usage_ns as f64 / 1e9);
            memory.get_or_create(&l).set(int(state.memory_bytes));
            processes.get_or_create(&l).set(state.processes);
        }
    }
    registry.register("instances", "Instances by LXD status", by_status);
    registry.register(
        "container_cpu_seconds",
        "CPU time a container has used since it started (LXD state)",
        cpu,
    );
    registry.register(
        "container_memory_bytes",
        "Memory a container uses (LXD state)",
        memory,
    );
    registry.register(
        "container_processes",
        "Processes in a container (LXD state)",
        processes,
    );

    let up = Gauge::<i64>::default();
    up.set(i64::from(gpus.unavailable.is_none()));
    registry.register("nvml_up", "1 when NVML answered for every GPU", up);
    let util = Family::<Labels, Gauge>::default();
    let mem_used = Family::<Labels, Gauge>::default();
    let mem_total = Family::<Labels, Gauge>::default();
    let temp = Family::<Labels, Gauge>::default();
    let power = Family::<Labels, FloatGauge>::default();
    let share_mem = Family::<Labels, Gauge>::default();
    let share_ratio = Family::<Labels, FloatGauge>::default();
    let share_procs = Family::<Labels, Gauge>::default();
    for g in &gpus.gpus {
        let l = labels(&[
            ("gpu", &g.uuid),
            ("index", &g.index.to_string()),
            ("model", &g.name),
        ]);
        mem_used.get_or_create(&l).set(int(g.memory_used_bytes));
        mem_total.get_or_create(&l).set(int(g.memory_total_bytes));
        if let Some(u) = g.utilization_percent {
            util.get_or_create(&l).set(i64::from(u));
        }
        if let Some(t) = g.temperature_celsius {
            temp.get_or_create(&l).set(i64::from(t));
        }
        if let Some(mw) = g.power_milliwatts {
            power.get_or_create(&l).set(f64::from(mw) / 1000.0);
        }
        let mut per_container: BTreeMap<&str, (u64, i64)> = BTreeMap::new();
        for p in &g.processes {
            if let Some(c) = &p.instance {
                let e = per_container.entry(c).or_default();
                e.0 += p.used_memory_bytes.unwrap_or(0);
                e.1 += 1;
            }
        }
        for (c, (bytes, n)) in per_container {
            let l = labels(&[("container", c), ("gpu", &g.uuid)]);
            share_mem.get_or_create(&l).set(int(bytes));
            share_procs.get_or_create(&l).set(n);
            if g.memory_total_bytes > 0 {
                share_ratio
                    .get_or_create(&l)
                    .set(bytes as f64 / g.memory_total_bytes as f64);
            }
        }
    }
    registry.register("gpu_utilization_percent", "GPU utilization", util);
    registry.register("gpu_memory_used_bytes", "GPU memory in use", mem_used);
    registry.register("gpu_memory_total_bytes", "GPU memory in all", mem_total);
    registry.register("gpu_temperature_celsius", "GPU core temperature", temp);
    registry.register("gpu_power_watts", "GPU power draw", power);
    registry.register(
        "container_gpu_memory_used_bytes",
        "GPU memory held by a container's compute processes",
        share_mem,
    );
    registry.register(
        "container_gpu_memory_share",
        "Fraction of a GPU's memory held by a container's compute processes",
        share_ratio,
    );
    registry.register(
        "container_gpu_processes",
        "A container's compute processes on a GPU",
        share_procs,
    );

    let shifts = node.idmap.first_start_shifts();
    let shifted = Counter::<u64>::default();
    shifted.inc_by(shifts.count);
    registry.register(
        "first_start_shifts",
        "New containers whose files the agent moved into their id range before the first start, \
         where LXD would have remapped them on the start",
        shifted,
    );
    let shift_seconds = Counter::<f64, AtomicU64>::default();
    shift_seconds.inc_by(shifts.seconds);
    registry.register(
        "first_start_shift_seconds",
        "Time spent moving new containers' files into their id range",
        shift_seconds,
    );

    let helper_retries = Counter::<u64>::default();
    helper_retries.inc_by(node.instances.file_helper_retries());
    registry.register(
        "lxd_file_helper_retries",
        "File calls tried again after LXD's file helper lost its socket (canonical/lxd#18403)",
        helper_retries,
    );

    let mut text = String::new();
    encode(&mut text, &registry).expect("writing to a String cannot fail");
    Ok(cohort_proto::metrics::prometheus_text(&text))
}

pub async fn render(node: &Node) -> Result<Response<Body>, ApiError> {
    let mut resp = Response::new(full(text(node).await?));
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    Ok(resp)
}
