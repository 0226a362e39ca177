//! `GET /v1/metrics`: the node's instances by status and its GPUs' memory and utilization in
//! Prometheus text format (prometheus-client).

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::Response;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::error::ApiError;
use crate::node::Node;

type Labels = Vec<(String, String)>;

pub async fn render(node: &Node) -> Result<Response<Full<Bytes>>, ApiError> {
    let instances = node.instances().await?;
    let nvml = node.config.nvml_library.clone();
    let gpus = tokio::task::spawn_blocking(move || crate::gpu::inventory(nvml.as_deref()))
        .await
        .expect("GPU inventory does not panic");

    let mut registry = Registry::with_prefix("cohort_agent");
    let by_status = Family::<Labels, Gauge>::default();
    for i in &instances {
        by_status
            .get_or_create(&vec![("status".into(), i.status.clone())])
            .inc();
    }
    registry.register("instances", "Instances by LXD status", by_status);
    let mem_used = Family::<Labels, Gauge>::default();
    let util = Family::<Labels, Gauge>::default();
    for g in &gpus.gpus {
        let labels = vec![("uuid".into(), g.uuid.clone())];
        mem_used
            .get_or_create(&labels)
            .set(i64::try_from(g.memory_used_bytes).unwrap_or(i64::MAX));
        if let Some(u) = g.utilization_percent {
            util.get_or_create(&labels).set(i64::from(u));
        }
    }
    registry.register("gpu_memory_used_bytes", "GPU memory in use", mem_used);
    registry.register("gpu_utilization_percent", "GPU utilization", util);

    let mut text = String::new();
    encode(&mut text, &registry).expect("writing to a String cannot fail");
    let mut resp = Response::new(Full::new(Bytes::from(text)));
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    Ok(resp)
}
