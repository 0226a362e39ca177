//! Only the controller gets in: the agent's mutual-TLS API accepts a client certificate from the
//! Cohort CA with the controller role, and refuses no certificate, another CA's, an expired one
//! and an agent's (node role) own.

use cohort_e2e::agent::{Leaf, TestAgent, TestCa};
use cohort_e2e::TestLxd;
use cohort_proto::agent::Health;

async fn health(
    agent: &TestAgent,
    client: &reqwest::Client,
) -> Result<reqwest::Response, reqwest::Error> {
    client.get(agent.url("/v1/health")).send().await
}

/// The agent refuses `identity` with one of the TLS alerts in `want` (e.g. `CertificateExpired`),
/// and an HTTPS request made with it fails too.
async fn refused(agent: &TestAgent, identity: Option<&Leaf>, case: &str, want: &[&str]) {
    match agent.handshake(identity).await {
        Ok(()) => panic!("{case}: the agent accepted the connection"),
        Err(why) => assert!(
            want.iter()
                .any(|w| why.contains(&format!("AlertReceived({w})"))),
            "{case}: refused, but not with {want:?}: {why}"
        ),
    }
    if let Ok(resp) = health(agent, &agent.client_with(identity)).await {
        panic!(
            "{case}: the agent answered an HTTPS request with {}",
            resp.status()
        );
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

    refused(&agent, None, "no certificate", &["CertificateRequired"]).await;

    let foreign = TestCa::new("Some other CA");
    let stranger = foreign.controller();
    refused(
        &agent,
        Some(&stranger),
        "foreign CA",
        &["CertificateRequired", "UnknownCA", "BadCertificate"],
    )
    .await;

    let expired = agent
        .ca
        .leaf("cohort-controller", cohort_proto::ROLE_CONTROLLER, true);
    refused(&agent, Some(&expired), "expired", &["CertificateExpired"]).await;

    let node = agent.ca.leaf("node-other", cohort_proto::ROLE_NODE, false);
    refused(&agent, Some(&node), "node role", &["AccessDenied"]).await;

    // The probe itself accepts what the agent accepts, and the controller still gets in after
    // the refusals.
    agent
        .handshake(Some(&agent.ca.controller()))
        .await
        .expect("controller is accepted by the raw TLS probe");
    let again = health(&agent, &agent.controller())
        .await
        .expect("controller again");
    assert_eq!(again.status(), 200);
}
