//! Issue 42, defect 13: two controllers renew one node's certificate at once (both polls found
//! it due). Each check holds the node's renewal lock: one renews, the other leaves the node to
//! its next poll, and the node ends with exactly one live certificate, the one its real agent
//! serves. Without the lock both ask the agent for a key and install, and whichever confirms
//! last revokes what the other made, possibly the certificate being served.

use std::sync::Arc;

use cohort_controller::agent_client::MtlsConnector;
use cohort_controller::app::renewal::{self, Renewal};
use cohort_controller::app::state::{connect_pinned, Controller};
use cohort_controller::db::models::node::Node;
use cohort_controller::db::models::node_certificate::NodeCertificate;
use cohort_controller::nodes::pki::Pki;
use cohort_e2e::cluster::Cluster;
use cohort_e2e::controller::test_config;
use diesel::prelude::*;

fn controller(cluster: &Cluster, pki: &Arc<Pki>, id: &str) -> Arc<Controller> {
    let mut config = test_config(&cluster.db_url, &cluster.controller_dir());
    config.worker.id = Some(id.into());
    config.database.pool_size = 4;
    config.server.node_cert_lifetime_s = 3600;
    let pool = cohort_controller::db::pool(&cluster.db_url, 4).expect("pool");
    let agents = Arc::new(MtlsConnector::new(pki, config.node_calls));
    Arc::new(Controller::new(pool, config, pki.clone(), agents))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_renewals_at_once_leave_one_live_certificate_the_one_served() {
    let mut cluster = Cluster::start(1).await;
    // Its own poller would renew too: these two controllers are the only ones.
    cluster.controller.kill();
    let pki = Arc::new(Pki::load(&cluster.controller_dir()).expect("the controller's CA"));
    let (a, b) = (
        controller(&cluster, &pki, "ctl-a"),
        controller(&cluster, &pki, "ctl-b"),
    );
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    // The node's certificate is at the end of its life on the books: both find it due.
    use cohort_controller::db::schema::node_certificates as nc;
    diesel::update(nc::table.filter(nc::node_name.eq("node1")))
        .set(
            nc::issued_at.eq(diesel::dsl::sql::<diesel::sql_types::Timestamptz>(
                "now() - interval '1000 days'",
            )),
        )
        .execute(&mut conn)
        .unwrap();

    let node = Node::by_name(&mut conn, "node1").unwrap().expect("node1");
    let live = NodeCertificate::live(&mut conn, "node1").unwrap();
    assert_eq!(live.len(), 1);
    let agent_a = connect_pinned(a.agents.as_ref(), &node, &live).unwrap();
    let agent_b = connect_pinned(b.agents.as_ref(), &node, &live).unwrap();
    let (ra, rb) = tokio::join!(
        renewal::check(&a, "node1", live.clone(), agent_a.as_ref()),
        renewal::check(&b, "node1", live.clone(), agent_b.as_ref()),
    );
    let outcomes = [ra, rb];
    let renewed = outcomes
        .iter()
        .filter(|r| matches!(r, Ok(Renewal::Renewed { .. })))
        .count();
    let busy = outcomes
        .iter()
        .filter(|r| matches!(r, Ok(Renewal::Busy)))
        .count();
    assert_eq!(
        (renewed, busy),
        (1, 1),
        "one renewal, the other left to the next poll: {outcomes:?}"
    );

    let now_live = NodeCertificate::live(&mut conn, "node1").unwrap();
    assert_eq!(now_live.len(), 1, "one live certificate: {now_live:?}");
    let agent = connect_pinned(a.agents.as_ref(), &node, &now_live).unwrap();
    let served = agent
        .identity()
        .await
        .expect("the agent answers")
        .fingerprint;
    assert_eq!(served, now_live[0].fingerprint, "the live one is served");
}
