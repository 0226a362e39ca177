//! Issue 24: placement counts homes and keeps a node's storage pool from filling up. Each
//! student of a course reserves their home's size beside the root disk, so a node holds only as
//! many as both fit; a node whose pool would have less than a tenth free once an instance's disk
//! is full takes no more, and the queue says so ("needs N GiB of disk; largest free on any node:
//! M GiB"); a request no pool could ever hold is refused; the pool's use per node is a metric.
//! Against the real database, with nodes as their polls would have left them.

use std::collections::BTreeMap;

use cohort_controller::courses::{course as courses, enrol, provision};
use cohort_controller::db::schema::{instances as inst, nodes};
use cohort_controller::error::ActionError;
use cohort_controller::instances::manage as instances;
use cohort_controller::placement::queue::place_queued;
use cohort_e2e::bodies::course;
use cohort_e2e::controller::TestController;
use cohort_proto::api::courses::{CourseHome, CreateCourse};
use cohort_proto::api::instances::{CreateInstance, GpuShare, Limits, PlacementStrategy};
use diesel::prelude::*;

const GIB: i64 = 1 << 30;

/// (node, home_gib, error) of instance `name`.
fn row(t: &TestController, name: &str) -> (Option<i64>, i32, Option<String>) {
    inst::table
        .filter(inst::name.eq(name))
        .select((inst::node_id, inst::home_gib, inst::error))
        .first(&mut t.conn())
        .unwrap()
}

fn disk_used_gib(t: &TestController, node: i64) -> i64 {
    nodes::table
        .find(node)
        .select(nodes::disk_used_gib)
        .first(&mut t.conn())
        .unwrap()
}

fn request(name: &str, disk_gib: u64) -> CreateInstance {
    CreateInstance {
        name: name.to_string(),
        image: "base".into(),
        limits: Some(Limits {
            cpu: 1,
            memory_mib: 512,
            disk_gib,
        }),
        gpus: 0,
        gpu_model: None,
        gpu_share: GpuShare::Shared,
        config: BTreeMap::new(),
        owner: None,
        node: None,
        strategy: PlacementStrategy::Spread,
        priority: 0,
        queue: true,
        start: true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_course_reserves_each_home_beside_its_root_disk() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    // 12 GiB of disk: two students of 2 GiB root and 3 GiB home fit, a third does not (without
    // the homes, all three would: 6 GiB).
    let node = t.node("node-h", (25400, 25409), 8, 16, false);
    diesel::update(nodes::table.find(node.id))
        .set(nodes::disk_total_bytes.eq(12 * GIB))
        .execute(&mut t.conn())
        .unwrap();
    let course = CreateCourse {
        memory_mib: Some(256),
        disk_gib: Some(2),
        home_mib: Some(3072),
        ..course("dh", "Homes", "base")
    };
    let made = courses::create(&t.ctl, admin.clone(), course)
        .await
        .unwrap();
    assert_eq!(made.home_mib, Some(3072));
    let roster = b"username,name,email,ssh_key\ns1,,,\ns2,,,\ns3,,,\n".to_vec();
    enrol::import(&t.ctl, admin.clone(), "dh".into(), roster)
        .await
        .unwrap();
    provision::provision(&t.ctl, admin.clone(), "dh".into())
        .await
        .unwrap();
    for name in ["dh-s1", "dh-s2"] {
        let (placed, home, _) = row(&t, name);
        assert_eq!((placed, home), (Some(node.id), 3), "{name}");
    }
    assert_eq!(
        disk_used_gib(&t, node.id),
        10,
        "2 x (2 GiB root + 3 GiB home)"
    );
    let (placed, _, why) = row(&t, "dh-s3");
    assert_eq!(placed, None);
    assert_eq!(
        why.as_deref(),
        Some("queued: needs 5 GiB of disk; largest free on any node: 2 GiB")
    );

    // Smaller homes: the placed students' reservations shrink, and the third fits.
    let home = CourseHome {
        home_mib: Some(1024),
    };
    let set = courses::set_home(&t.ctl, admin.clone(), "dh".into(), home)
        .await
        .unwrap();
    assert_eq!(set.home_mib, Some(1024));
    assert_eq!(disk_used_gib(&t, node.id), 6);
    place_queued(&mut t.conn(), &t.ctl.config.placement).unwrap();
    assert_eq!(row(&t, "dh-s3"), (Some(node.id), 1, None));
    assert_eq!(disk_used_gib(&t, node.id), 9);

    // A size out of range names its field.
    let bad = CourseHome { home_mib: Some(16) };
    match courses::set_home(&t.ctl, admin, "dh".into(), bad).await {
        Err(ActionError::Invalid { field, .. }) => assert_eq!(field, "home_mib"),
        other => panic!("a 16 MiB home: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_pool_is_nearly_full_takes_no_more() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    // 1 TiB by the reservations, but its pool (100 GiB) is 80 GiB full: 10 GiB may still go
    // before the last tenth.
    let node = t.node("node-p", (25500, 25509), 8, 16, false);
    let pool = |used: i64| {
        diesel::update(nodes::table.find(node.id))
            .set((
                nodes::pool_used_bytes.eq(used * GIB),
                nodes::pool_total_bytes.eq(100 * GIB),
            ))
            .execute(&mut t.conn())
            .unwrap();
    };
    pool(80);
    instances::create(&t.ctl, admin.clone(), request("small", 5))
        .await
        .unwrap();
    assert_eq!(row(&t, "small").0, Some(node.id));
    instances::create(&t.ctl, admin.clone(), request("large", 15))
        .await
        .unwrap();
    let (placed, _, why) = row(&t, "large");
    assert_eq!(placed, None, "80 + 15 GiB of a 100 GiB pool");
    assert_eq!(
        why.as_deref(),
        Some("queued: needs 15 GiB of disk; largest free on any node: 10 GiB")
    );
    // More than any pool could hold with a tenth free: refused, not queued for ever.
    match instances::create(&t.ctl, admin.clone(), request("huge", 95)).await {
        Err(ActionError::Conflict { field, .. }) => {
            assert_eq!(field.as_deref(), Some("limits.disk_gib"))
        }
        other => panic!("95 GiB on a 100 GiB pool: {other:?}"),
    }

    // The pool's use, per node, at the last poll.
    let fleet = cohort_controller::app::metrics::read_fleet(&mut t.conn()).unwrap();
    t.ctl.metrics.set_fleet(&fleet);
    let text = t.ctl.metrics.render();
    for line in [
        "cohort_controller_node_pool_bytes{node=\"node-p\",kind=\"used\"} 85899345920",
        "cohort_controller_node_pool_bytes{node=\"node-p\",kind=\"total\"} 107374182400",
    ] {
        assert!(text.contains(line), "no {line} in:\n{text}");
    }

    // Files deleted: the next poll finds room, and the queue places it.
    pool(50);
    place_queued(&mut t.conn(), &t.ctl.config.placement).unwrap();
    assert_eq!(row(&t, "large"), (Some(node.id), 0, None));
}
