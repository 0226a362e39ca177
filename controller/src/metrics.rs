//! Prometheus metrics served at `/metrics`.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: String,
}

pub struct Metrics {
    registry: Registry,
    pub http_requests: Family<RequestLabels, Counter>,
    pub operation_steps: Family<OutcomeLabels, Counter>,
    pub polls: Family<OutcomeLabels, Counter>,
    pub queued_instances: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("cohort_controller");
        let http_requests = Family::<RequestLabels, Counter>::default();
        let operation_steps = Family::<OutcomeLabels, Counter>::default();
        let polls = Family::<OutcomeLabels, Counter>::default();
        let queued_instances = Gauge::default();
        registry.register(
            "http_requests",
            "HTTP requests by status",
            http_requests.clone(),
        );
        registry.register(
            "operation_steps",
            "Operation steps by outcome",
            operation_steps.clone(),
        );
        registry.register("node_polls", "Inventory polls by outcome", polls.clone());
        registry.register(
            "queued_instances",
            "Instances waiting for capacity",
            queued_instances.clone(),
        );
        Metrics {
            registry,
            http_requests,
            operation_steps,
            polls,
            queued_instances,
        }
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

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
