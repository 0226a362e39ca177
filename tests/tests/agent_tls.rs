//! Only the controller gets in: the agent's mutual-TLS API accepts a client certificate from the
//! Cohort CA with the controller role, and refuses no certificate, another CA's, an expired one
//! and an agent's (node role) own.

use cohort_e2e::agent::{TestAgent, TestCa};
use cohort_e2e::TestLxd;
use cohort_proto::agent::Health;

async fn health(
    agent: &TestAgent,
    client: &reqwest::Client,
) -> Result<reqwest::Response, reqwest::Error> {
    client.get(agent.url("/v1/health")).send().await
}

/// The request fails with the TLS alert the agent sent (`want`, e.g. `CertificateExpired`).
async fn refused(agent: &TestAgent, client: &reqwest::Client, case: &str, want: &[&str]) {
    match health(agent, client).await {
        Err(e) => {
            let chain = format!("{e:?}");
            assert!(
                want.iter()
                    .any(|w| chain.contains(&format!("AlertReceived({w})"))),
                "{case}: refused, but not with {want:?}: {chain}"
            );
        }
        Ok(resp) => panic!("{case}: the agent answered {}", resp.status()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_controller_certificates_from_the_cohort_ca_are_accepted() {
    let lxd = TestLxd::new();
    let agent = TestAgent::start(&lxd).await;

    let resp = health(&agent, &agent.controller())
        .await
        .expect("controller is accepted");
    assert_eq!(resp.status(), 200);
    let h: Health = resp.json().await.expect("health JSON");
    assert_eq!(h.node_name, "node-test");
    assert_eq!(h.lxd_project, lxd.project());
    assert!(h.lxd_version.starts_with('5'), "{}", h.lxd_version);

    refused(
        &agent,
        &agent.client_with(None),
        "no certificate",
        &["CertificateRequired"],
    )
    .await;

    let foreign = TestCa::new("Some other CA");
    let stranger = foreign.controller();
    refused(
        &agent,
        &agent.client_with(Some(&stranger)),
        "foreign CA",
        &["CertificateRequired", "UnknownCA", "BadCertificate"],
    )
    .await;

    let expired = agent
        .ca
        .leaf("cohort-controller", cohort_proto::ROLE_CONTROLLER, true);
    refused(
        &agent,
        &agent.client_with(Some(&expired)),
        "expired",
        &["CertificateExpired"],
    )
    .await;

    let node = agent.ca.leaf("node-other", cohort_proto::ROLE_NODE, false);
    refused(
        &agent,
        &agent.client_with(Some(&node)),
        "node role",
        &["AccessDenied"],
    )
    .await;

    // The controller still gets in after the refusals.
    let again = health(&agent, &agent.controller())
        .await
        .expect("controller again");
    assert_eq!(again.status(), 200);
}
