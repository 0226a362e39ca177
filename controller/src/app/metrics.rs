//! Prometheus metrics served at `/metrics`: counters and latency histograms this process keeps
//! (requests by route and status, operation steps, polls), and gauges read from PostgreSQL at
//! each scrape (nodes, instances, queue, operations, GPU use by course, storage pool use by
//! node), so every controller reports the same fleet.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

pub use crate::db::queries::metrics::{read_fleet, Fleet};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: String,
    /// The matched route pattern (`/api/v1/instances/{name}`), never the raw path.
    pub route: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    pub kind: String,
    pub status: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CertificateLabels {
    pub node: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CourseLabels {
    pub course: String,
}

/// A node's storage pool: `kind` is `used` or `total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    pub node: String,
    pub kind: String,
}

type LatencyFamily = Family<RouteLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 1 ms to about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

pub struct Metrics {
    registry: Registry,
    pub http_requests: Family<RequestLabels, Counter>,
    pub request_duration: LatencyFamily,
    pub operation_steps: Family<OutcomeLabels, Counter>,
    pub polls: Family<OutcomeLabels, Counter>,
    pub queued_instances: Gauge,
    pub nodes: Family<StateLabels, Gauge>,
    pub instances: Family<StateLabels, Gauge>,
    pub operations: Family<OperationLabels, Gauge>,
    pub course_instances: Family<CourseLabels, Gauge>,
    pub course_gpu_processes: Family<CourseLabels, Gauge>,
    pub course_gpu_memory: Family<CourseLabels, Gauge>,
    pub node_pool: Family<PoolLabels, Gauge>,
    pub instance_pages: Family<OutcomeLabels, Counter>,
    pub node_certificate_expiry: Family<CertificateLabels, Gauge>,
    /// This host's clock minus the database's at the last check, in seconds.
    pub clock_skew: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// GPU time by course (issue 43), named without this registry's prefix.
    pub gpu_time: GpuTimeCounters,
}

type SecondsCounter = Counter<f64, std::sync::atomic::AtomicU64>;

/// `cohort_gpu_allocated_seconds_total` and `cohort_gpu_busy_seconds_total` by course: what
/// this controller's polls added (sum over controllers). Labels stay bounded: per course, never
/// per student; per-student figures are the usage API's.
pub struct GpuTimeCounters {
    registry: Registry,
    pub allocated: Family<CourseLabels, SecondsCounter>,
    pub busy: Family<CourseLabels, SecondsCounter>,
}

impl Default for GpuTimeCounters {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("cohort");
        let (allocated, busy) = (Family::default(), Family::default());
        registry.register(
            "gpu_allocated_seconds",
            "GPU-seconds a course's containers held a GPU (one per GPU held)",
            Family::<CourseLabels, SecondsCounter>::clone(&allocated),
        );
        registry.register(
            "gpu_busy_seconds",
            "GPU-seconds a course's containers kept their GPUs busy (weighted by utilisation)",
            Family::<CourseLabels, SecondsCounter>::clone(&busy),
        );
        GpuTimeCounters {
            registry,
            allocated,
            busy,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("cohort_controller");
        let m = Metrics {
            registry: Registry::default(),
            http_requests: Family::default(),
            request_duration: Family::new_with_constructor(latency_histogram),
            operation_steps: Family::default(),
            polls: Family::default(),
            queued_instances: Gauge::default(),
            nodes: Family::default(),
            instances: Family::default(),
            operations: Family::default(),
            course_instances: Family::default(),
            course_gpu_processes: Family::default(),
            course_gpu_memory: Family::default(),
            node_pool: Family::default(),
            instance_pages: Family::default(),
            node_certificate_expiry: Family::default(),
            clock_skew: Gauge::default(),
            gpu_time: GpuTimeCounters::default(),
        };
        registry.register(
            "http_requests",
            "HTTP requests by status",
            m.http_requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "API request latency by method and matched route",
            m.request_duration.clone(),
        );
        registry.register(
            "operation_steps",
            "Operation steps by outcome",
            m.operation_steps.clone(),
        );
        registry.register("node_polls", "Inventory polls by outcome", m.polls.clone());
        registry.register(
            "queued_instances",
            "Instances waiting for capacity",
            m.queued_instances.clone(),
        );
        registry.register("nodes", "Nodes by state", m.nodes.clone());
        registry.register(
            "instances",
            "Instances by observed state",
            m.instances.clone(),
        );
        registry.register(
            "operations",
            "Operations by kind and status (outcome once ended)",
            m.operations.clone(),
        );
        registry.register(
            "course_instances",
            "Instances of a course",
            m.course_instances.clone(),
        );
        registry.register(
            "course_gpu_processes",
            "GPU compute processes in a course's instances at the last poll",
            m.course_gpu_processes.clone(),
        );
        registry.register(
            "course_gpu_memory_used_bytes",
            "GPU memory held by a course's instances at the last poll",
            m.course_gpu_memory.clone(),
        );
        registry.register(
            "node_pool_bytes",
            "Bytes of each node's LXD storage pool, used and total, at its last poll",
            m.node_pool.clone(),
        );
        registry.register(
            "instance_pages",
            "Pages of GET /instances: served again unchanged (hit) or read (miss)",
            m.instance_pages.clone(),
        );
        registry.register(
            "node_certificate_expiry_timestamp_seconds",
            "When the newest live certificate of a node expires (Unix time); renewed at two \
             thirds of its life, so one within a third of its life of now is a renewal failing",
            m.node_certificate_expiry.clone(),
        );
        registry.register(
            "clock_skew_seconds",
            "This host's clock minus the database's at the last /healthz or start (positive: \
             ahead); Cohort compares times on the database's clock",
            m.clock_skew.clone(),
        );
        Metrics { registry, ..m }
    }
}

impl Metrics {
    pub fn count(family: &Family<OutcomeLabels, Counter>, outcome: &str) {
        family
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// Adds one poll's GPU time by course.
    pub fn count_gpu_time(&self, added: &[crate::app::gpu_time::Added]) {
        for a in added {
            let l = CourseLabels {
                course: a.course.clone(),
            };
            self.gpu_time
                .allocated
                .get_or_create(&l)
                .inc_by(a.allocated_s);
            self.gpu_time.busy.get_or_create(&l).inc_by(a.busy_s);
        }
    }

    /// Sets the gauges read from the database (series gone from it disappear).
    pub fn set_fleet(&self, fleet: &Fleet) {
        let state = |s: &str| StateLabels { state: s.into() };
        self.nodes.clear();
        for (s, n) in &fleet.nodes {
            self.nodes.get_or_create(&state(s)).set(*n);
        }
        self.instances.clear();
        for (s, n) in &fleet.instances {
            self.instances.get_or_create(&state(s)).set(*n);
        }
        self.queued_instances.set(fleet.queued);
        self.operations.clear();
        for (kind, status, n) in &fleet.operations {
            self.operations
                .get_or_create(&OperationLabels {
                    kind: kind.clone(),
                    status: status.clone(),
                })
                .set(*n);
        }
        self.course_instances.clear();
        self.course_gpu_processes.clear();
        self.course_gpu_memory.clear();
        for (course, instances, procs, bytes) in &fleet.courses {
            let l = CourseLabels {
                course: course.clone(),
            };
            self.course_instances.get_or_create(&l).set(*instances);
            self.course_gpu_processes.get_or_create(&l).set(*procs);
            self.course_gpu_memory.get_or_create(&l).set(*bytes);
        }
        self.node_certificate_expiry.clear();
        for (node, expiry) in &fleet.certificates {
            self.node_certificate_expiry
                .get_or_create(&CertificateLabels { node: node.clone() })
                .set(*expiry);
        }
        self.node_pool.clear();
        for (node, used, total) in &fleet.pools {
            for (kind, bytes) in [("used", used), ("total", total)] {
                self.node_pool
                    .get_or_create(&PoolLabels {
                        node: node.clone(),
                        kind: kind.into(),
                    })
                    .set(*bytes);
            }
        }
    }

    /// The Prometheus text exposition format (0.0.4): see [`cohort_proto::metrics`].
    pub fn render(&self) -> String {
        let mut open = String::new();
        if encode(&mut open, &self.registry).is_err()
            || encode(&mut open, &self.gpu_time.registry).is_err()
        {
            return String::new();
        }
        cohort_proto::metrics::prometheus_text(&open)
    }
}
