//! Placement against the real database: 50 concurrent requests race for the last GPU slots and
//! ports; share_limit, the GPU model, cordoned and offline nodes are respected; the queue places
//! the highest priority first when capacity frees.

use std::collections::{BTreeMap, HashMap, HashSet};

use cohort_controller::db::models::instance::Instance;
use cohort_controller::db::schema::{gpu_allocations, gpus, instances as inst, nodes};
use cohort_controller::error::ActionError;
use cohort_controller::instances::manage as instances;
use cohort_controller::placement::queue::place_queued;
use cohort_e2e::bodies::course;
use cohort_e2e::controller::TestController;
use cohort_proto::api::instances::{
    CreateInstance, DesiredState, GpuShare, Limits, ObservedState, PlacementStrategy,
};
use diesel::prelude::*;

fn request(name: &str, gpus: u32, model: Option<&str>, queue: bool) -> CreateInstance {
    CreateInstance {
        name: name.to_string(),
        image: "base".into(),
        limits: Some(Limits {
            cpu: 1,
            memory_mib: 512,
            disk_gib: 1,
        }),
        gpus,
        gpu_model: model.map(String::from),
        gpu_share: GpuShare::Shared,
        config: BTreeMap::new(),
        owner: None,
        node: None,
        strategy: PlacementStrategy::Spread,
        priority: 0,
        queue,
        start: true,
    }
}

/// (instance name, node name, port) of a placed instance.
type Placed = (String, String, i32);

/// Every placed instance, and GPU uuid -> slots taken.
fn allocations(t: &TestController) -> (Vec<Placed>, HashMap<String, Vec<i32>>) {
    let mut conn = t.conn();
    let placed: Vec<(String, String, Option<i32>)> = inst::table
        .inner_join(nodes::table)
        .select((inst::name, nodes::name, inst::ssh_port))
        .load(&mut conn)
        .unwrap();
    let mut slots: HashMap<String, Vec<i32>> = HashMap::new();
    let rows: Vec<(String, i32)> = gpu_allocations::table
        .inner_join(gpus::table.on(gpus::id.eq(gpu_allocations::gpu_id)))
        .select((gpus::uuid, gpu_allocations::slot))
        .load(&mut conn)
        .unwrap();
    for (uuid, slot) in rows {
        slots.entry(uuid).or_default().push(slot);
    }
    (
        placed
            .into_iter()
            .map(|(i, n, p)| (i, n, p.expect("placed has a port")))
            .collect(),
        slots,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn fifty_concurrent_requests_never_share_a_gpu_slot_or_port() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    // Capacity for 6 GPU instances: gpu-a0 shares 2, gpu-a1 shares 2, gpu-b0 shares 2; node b
    // has only 4 ports. Node c (cordoned) and d (offline) have free GPUs that must stay unused.
    let a = t.node("node-a", (21000, 21063), 64, 256, true);
    let b = t.node("node-b", (21100, 21103), 64, 256, true);
    let c = t.node("node-c", (21200, 21263), 64, 256, true);
    let d = t.node("node-d", (21300, 21363), 64, 256, true);
    t.gpu(&a, "GPU-a0", 0, "A100", 2);
    t.gpu(&a, "GPU-a1", 1, "A100", 2);
    t.gpu(&b, "GPU-b0", 0, "A100", 2);
    t.gpu(&c, "GPU-c0", 0, "A100", 4);
    t.gpu(&d, "GPU-d0", 0, "A100", 4);
    t.gpu(&a, "GPU-a2", 2, "T4", 8);
    t.set_node_state(&c, "cordoned");
    t.set_node_state(&d, "offline");

    let mut tasks = Vec::new();
    for i in 0..50 {
        let ctl = t.ctl.clone();
        let caller = admin.clone();
        // Half queue when nothing fits, half want a refusal.
        let req = request(&format!("race-{i}"), 1, Some("A100"), i % 2 == 0);
        tasks.push(tokio::spawn(async move {
            instances::create(&ctl, caller, req).await
        }));
    }
    let mut refused = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => {}
            Err(ActionError::NoCapacity(msg)) => {
                assert!(msg.contains("no node can hold"), "{msg}");
                refused += 1;
            }
            Err(other) => panic!("unexpected error: {other:?}"),
        }
    }

    let (placed, slots) = allocations(&t);
    assert_eq!(
        placed.len(),
        6,
        "exactly the 6 free A100 slots are used: {placed:?}"
    );
    let ports: HashSet<(String, i32)> = placed.iter().map(|(_, n, p)| (n.clone(), *p)).collect();
    assert_eq!(ports.len(), placed.len(), "a port was handed out twice");
    for (uuid, taken) in &slots {
        let distinct: HashSet<_> = taken.iter().collect();
        assert_eq!(
            distinct.len(),
            taken.len(),
            "{uuid}: a slot was handed out twice"
        );
        assert!(
            taken.len() <= 2,
            "{uuid} has {} allocations over share_limit 2",
            taken.len()
        );
        assert!(
            uuid == "GPU-a0" || uuid == "GPU-a1" || uuid == "GPU-b0",
            "{uuid} must not be used"
        );
    }
    assert!(
        placed
            .iter()
            .all(|(_, n, _)| n == "node-a" || n == "node-b"),
        "cordoned/offline node used"
    );
    let mut conn = t.conn();
    let queued = Instance::queued(&mut conn, 100).unwrap();
    assert_eq!(
        queued.len() + refused,
        44,
        "every loser is queued or refused"
    );
    assert!(
        refused > 0 && !queued.is_empty(),
        "both kinds of losers are seen"
    );
    let rows: i64 = inst::table.count().get_result(&mut conn).unwrap();
    assert_eq!(rows as usize, 6 + queued.len(), "the refused left no row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_exclusive_share_and_node_state_filters_hold() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    let a = t.node("node-a", (22000, 22063), 64, 256, true);
    let cpu_only = t.node("node-cpu", (22100, 22163), 64, 256, false);
    t.gpu(&a, "GPU-t4", 0, "T4", 4);
    t.gpu(&a, "GPU-a100", 1, "A100", 1);
    t.gpu(&cpu_only, "GPU-nort", 0, "A100", 1);

    // An exclusive A100 goes to the one with share_limit 1, never to the node without the
    // NVIDIA runtime; a second one has nowhere to go.
    let mut excl = request("excl-1", 1, Some("A100"), false);
    excl.gpu_share = GpuShare::Exclusive;
    instances::create(&t.ctl, admin.clone(), excl.clone())
        .await
        .expect("first exclusive");
    excl.name = "excl-2".into();
    let second = instances::create(&t.ctl, admin.clone(), excl).await;
    assert!(
        matches!(second, Err(ActionError::NoCapacity(_))),
        "{second:?}"
    );

    // An exclusive T4 is refused as one no node can ever hold (issue 25), not as one that does
    // not fit now: the only T4 is shared (limit 4).
    let mut t4x = request("t4-excl", 1, Some("T4"), false);
    t4x.gpu_share = GpuShare::Exclusive;
    let never = instances::create(&t.ctl, admin.clone(), t4x).await;
    assert!(
        matches!(&never, Err(ActionError::Conflict { field: Some(f), .. }) if f == "gpus"),
        "{never:?}"
    );

    // Four shared T4 slots, then none.
    for i in 0..4 {
        instances::create(
            &t.ctl,
            admin.clone(),
            request(&format!("t4-{i}"), 1, Some("T4"), false),
        )
        .await
        .expect("T4 slot");
    }
    assert!(matches!(
        instances::create(&t.ctl, admin.clone(), request("t4-5", 1, Some("T4"), false)).await,
        Err(ActionError::NoCapacity(_))
    ));
    let (_, slots) = allocations(&t);
    assert_eq!(slots["GPU-t4"].len(), 4);
    assert_eq!(slots["GPU-a100"], vec![0]);
    assert!(!slots.contains_key("GPU-nort"));

    // CPU-only instances spread over both nodes, skip a cordoned one and an offline one.
    t.set_node_state(&a, "cordoned");
    instances::create(&t.ctl, admin.clone(), request("cpu-1", 0, None, false))
        .await
        .unwrap();
    t.set_node_state(&cpu_only, "offline");
    let none = instances::create(&t.ctl, admin.clone(), request("cpu-2", 0, None, false)).await;
    assert!(matches!(none, Err(ActionError::NoCapacity(_))), "{none:?}");
    let (placed, _) = allocations(&t);
    let cpu1 = placed.iter().find(|(i, _, _)| i == "cpu-1").unwrap();
    assert_eq!(cpu1.1, "node-cpu", "cordoned node-a took a placement");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_places_the_highest_priority_first_when_capacity_frees() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    let a = t.node("node-a", (23000, 23063), 64, 256, true);
    t.gpu(&a, "GPU-0", 0, "A100", 1);
    instances::create(&t.ctl, admin.clone(), request("holder", 1, None, false))
        .await
        .unwrap();
    for (name, priority) in [("low", 0), ("high", 10), ("mid", 5)] {
        let mut req = request(name, 1, None, true);
        req.priority = priority;
        instances::create(&t.ctl, admin.clone(), req).await.unwrap();
    }
    let mut conn = t.conn();
    let order: Vec<String> = Instance::queued(&mut conn, 10)
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(order, ["high", "mid", "low"]);
    let config = t.ctl.config.placement.clone();
    assert_eq!(
        place_queued(&mut conn, &config).unwrap(),
        0,
        "nothing frees, nothing placed"
    );

    // Free the GPU: the highest priority gets it, the others stay queued.
    let holder = Instance::by_name(&mut conn, "holder").unwrap().unwrap();
    Instance::delete(&mut conn, holder.id).unwrap();
    assert_eq!(place_queued(&mut conn, &config).unwrap(), 1);
    let high = Instance::by_name(&mut conn, "high").unwrap().unwrap();
    assert_eq!(high.node_id, Some(a.id));
    assert_eq!(high.observed_state, ObservedState::Pending);
    let still: Vec<String> = Instance::queued(&mut conn, 10)
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(still, ["mid", "low"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_prefers_a_node_that_already_holds_the_image() {
    use cohort_controller::db::models::image::Image;
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    let base = t.image("base");
    t.image("other-image");
    // Spread alone would pick node-big (more memory left); node-small holds `base`.
    let _big = t.node("node-big", (23000, 23063), 64, 512, false);
    let small = t.node("node-small", (23100, 23163), 64, 128, false);
    Image::mark_held(&mut t.conn(), base.id, small.id).unwrap();

    instances::create(&t.ctl, admin.clone(), request("with-image", 0, None, false))
        .await
        .expect("placed");
    let mut other = request("without-image", 0, None, false);
    other.image = "other-image".into();
    instances::create(&t.ctl, admin.clone(), other)
        .await
        .expect("placed");
    let (placed, _) = allocations(&t);
    let node_of = |name: &str| placed.iter().find(|(i, _, _)| i == name).unwrap().1.clone();
    assert_eq!(node_of("with-image"), "node-small", "{placed:?}");
    assert_eq!(node_of("without-image"), "node-big", "{placed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_past_the_least_loaded_window_is_still_found() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    // 70 empty nodes without the NVIDIA runtime rank first (equal load, lower ids); the only
    // GPU node comes last, outside the window of 64 a first pass reads from the index.
    for n in 0..70 {
        let first = 24000 + n * 10;
        t.node(&format!("cpu-{n:02}"), (first, first + 9), 64, 256, false);
    }
    let gpu_node = t.node("gpu-last", (24800, 24809), 64, 256, true);
    t.gpu(&gpu_node, "GPU-last", 0, "A100", 1);

    instances::create(&t.ctl, admin.clone(), request("wants-gpu", 1, None, false))
        .await
        .expect("the GPU node is found past the window");
    let (placed, slots) = allocations(&t);
    assert_eq!(placed, [("wants-gpu".into(), "gpu-last".into(), 24800)]);
    assert_eq!(slots["GPU-last"], vec![0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spread_takes_the_least_loaded_node_and_pack_the_most_loaded_that_fits() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    // 512 MiB instances: four fill a 2 GiB node.
    let small = t.node("node-small", (25000, 25063), 64, 2, false);
    t.node("node-big", (25100, 25163), 64, 8, false);
    let mut pinned = request("seed", 0, None, false);
    pinned.node = Some(small.name.clone());
    instances::create(&t.ctl, admin.clone(), pinned)
        .await
        .unwrap();

    // Spread: node-big has the least memory committed for its size.
    instances::create(&t.ctl, admin.clone(), request("spread-1", 0, None, false))
        .await
        .unwrap();
    // Pack: node-small is the most committed (1/4 against 1/16) until it is full.
    for i in 0..4 {
        let mut packed = request(&format!("pack-{i}"), 0, None, false);
        packed.strategy = PlacementStrategy::Pack;
        instances::create(&t.ctl, admin.clone(), packed)
            .await
            .unwrap();
    }
    let (placed, _) = allocations(&t);
    let node_of = |name: &str| placed.iter().find(|(i, _, _)| i == name).unwrap().1.clone();
    assert_eq!(node_of("spread-1"), "node-big", "{placed:?}");
    for i in 0..3 {
        assert_eq!(node_of(&format!("pack-{i}")), "node-small", "{placed:?}");
    }
    assert_eq!(
        node_of("pack-3"),
        "node-big",
        "node-small was full: {placed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lowest_free_port_is_taken_after_a_gap_and_past_the_highest_without_one() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    t.node("node-a", (26000, 26004), 64, 256, false);
    for i in 0..3 {
        instances::create(
            &t.ctl,
            admin.clone(),
            request(&format!("p-{i}"), 0, None, false),
        )
        .await
        .unwrap();
    }
    let port_of = |name: &str| {
        let (placed, _) = allocations(&t);
        placed.iter().find(|(i, _, _)| i == name).unwrap().2
    };
    assert_eq!(
        [port_of("p-0"), port_of("p-1"), port_of("p-2")],
        [26000, 26001, 26002]
    );

    // A gap below the highest taken port is filled first, then the range goes on above it.
    let mut conn = t.conn();
    let middle = Instance::by_name(&mut conn, "p-1").unwrap().unwrap();
    Instance::delete(&mut conn, middle.id).unwrap();
    instances::create(&t.ctl, admin.clone(), request("fills-gap", 0, None, false))
        .await
        .unwrap();
    assert_eq!(port_of("fills-gap"), 26001);
    instances::create(&t.ctl, admin.clone(), request("next", 0, None, false))
        .await
        .unwrap();
    assert_eq!(port_of("next"), 26003);

    // The first port freed is found too, and a full range takes no more.
    let first = Instance::by_name(&mut conn, "p-0").unwrap().unwrap();
    Instance::delete(&mut conn, first.id).unwrap();
    instances::create(
        &t.ctl,
        admin.clone(),
        request("fills-first", 0, None, false),
    )
    .await
    .unwrap();
    assert_eq!(port_of("fills-first"), 26000);
    instances::create(&t.ctl, admin.clone(), request("last", 0, None, false))
        .await
        .unwrap();
    assert_eq!(port_of("last"), 26004);
    let full = instances::create(&t.ctl, admin.clone(), request("no-port", 0, None, false)).await;
    assert!(matches!(full, Err(ActionError::NoCapacity(_))), "{full:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_instance_is_inserted_placed_and_a_refused_one_leaves_nothing() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    let a = t.node("node-a", (27000, 27001), 8, 16, true);
    t.gpu(&a, "GPU-one", 0, "T4", 2);
    let counters = |t: &TestController| -> (i64, i64, i64, i32, i32) {
        let mut conn = t.conn();
        let (cpu, memory, disk, count) = nodes::table
            .find(a.id)
            .select((
                nodes::cpu_used,
                nodes::memory_used_mib,
                nodes::disk_used_gib,
                nodes::instance_count,
            ))
            .first(&mut conn)
            .unwrap();
        let allocated = gpus::table
            .filter(gpus::uuid.eq("GPU-one"))
            .select(gpus::allocated)
            .first(&mut conn)
            .unwrap();
        (cpu, memory, disk, count, allocated)
    };

    // The row holds what was asked for, its node, port and GPU slot, and is pending; the node's
    // counters and the GPU's count moved once.
    let mut req = request("placed", 1, Some("T4"), false);
    req.priority = 7;
    req.config = BTreeMap::from([("limits.processes".to_string(), "500".to_string())]);
    instances::create(&t.ctl, admin.clone(), req).await.unwrap();
    let row = Instance::by_name(&mut t.conn(), "placed").unwrap().unwrap();
    assert_eq!(
        (row.node_id, row.ssh_port, row.observed_state.as_str()),
        (Some(a.id), Some(27000), "pending")
    );
    assert_eq!((row.cpu, row.memory_mib, row.disk_gib), (1, 512, 1));
    assert_eq!((row.gpu_count, row.gpu_model.as_deref()), (1, Some("T4")));
    assert_eq!((row.priority, row.owner_id), (7, admin.user.id));
    assert_eq!(row.config["limits.processes"], "500");
    assert_eq!(allocations(&t).1["GPU-one"], vec![0]);
    assert_eq!(counters(&t), (1, 512, 1, 1, 1));

    // A taken name is a conflict on `name`, and the node keeps nothing of it.
    let taken = instances::create(&t.ctl, admin.clone(), request("placed", 1, None, false)).await;
    assert!(
        matches!(&taken, Err(ActionError::Conflict { field: Some(f), .. }) if f == "name"),
        "{taken:?}"
    );
    assert_eq!(counters(&t), (1, 512, 1, 1, 1));
    assert_eq!(allocations(&t).1["GPU-one"], vec![0]);

    // The last port goes; then a request that may not queue leaves no row, one that may is
    // written queued, with no node, port or slot.
    instances::create(&t.ctl, admin.clone(), request("second", 0, None, false))
        .await
        .unwrap();
    let refused =
        instances::create(&t.ctl, admin.clone(), request("refused", 0, None, false)).await;
    assert!(
        matches!(refused, Err(ActionError::NoCapacity(_))),
        "{refused:?}"
    );
    assert!(Instance::by_name(&mut t.conn(), "refused")
        .unwrap()
        .is_none());
    instances::create(&t.ctl, admin.clone(), request("waits", 1, None, true))
        .await
        .unwrap();
    let waits = Instance::by_name(&mut t.conn(), "waits").unwrap().unwrap();
    assert_eq!(
        (waits.node_id, waits.ssh_port, waits.observed_state.as_str()),
        (None, None, "queued")
    );
    assert_eq!(counters(&t), (2, 1024, 2, 2, 1));
    assert_eq!(allocations(&t).1["GPU-one"], vec![0]);
}

/// A page of `GET /instances` and `GET /instances/{name}` show the same instance: its owner,
/// image, node, SSH address, GPUs in index order with their slots, and what the poller and the
/// reclaimer recorded of it; paging by name covers every instance once.
#[tokio::test]
async fn a_page_of_instances_shows_what_each_holds_and_agrees_with_get() {
    use cohort_controller::accounts::auth::Bearer;
    use cohort_controller::db::models::instance_usage::{InstanceUsage, Observed};
    use cohort_proto::api::instances::InstancePage;

    let t = TestController::new();
    let (admin, token) = t.user("admin", "admin");
    t.image("base");
    let a = t.node("node-a", (21000, 21063), 64, 256, true);
    // Inserted out of index order: the view orders a multi-GPU instance's GPUs by index.
    t.gpu(&a, "GPU-a1", 1, "A100", 2);
    t.gpu(&a, "GPU-a0", 0, "A100", 2);
    for (name, gpus) in [("two-gpus", 2), ("one-gpu", 1), ("no-gpu", 0)] {
        let model = (gpus > 0).then_some("A100");
        instances::create(&t.ctl, admin.clone(), request(name, gpus, model, false))
            .await
            .unwrap();
    }
    let mut conn = t.conn();
    let id = |conn: &mut PgConnection, name: &str| -> i64 {
        inst::table
            .filter(inst::name.eq(name))
            .select(inst::id)
            .first(conn)
            .unwrap()
    };
    let one = id(&mut conn, "one-gpu");
    InstanceUsage::observe(
        &mut conn,
        one,
        &Observed {
            running: true,
            gpus: serde_json::json!({"GPU-a0": {"processes": 1, "memory_used_bytes": 1024,
                                                "memory_share": 0.5}}),
            gpu_processes: 1,
            gpu_memory_used_bytes: 1024,
            gpu_busy: true,
        },
    )
    .unwrap();
    let none = id(&mut conn, "no-gpu");
    InstanceUsage::set_stopped(&mut conn, none, "idle for 2h").unwrap();
    // What the database holds: each instance's (uuid, model, slot) in GPU index order.
    let held: Vec<(String, String, String, i32)> = gpu_allocations::table
        .inner_join(gpus::table.on(gpus::id.eq(gpu_allocations::gpu_id)))
        .inner_join(inst::table.on(inst::id.eq(gpu_allocations::instance_id)))
        .order((inst::name, gpus::idx))
        .select((inst::name, gpus::uuid, gpus::model, gpu_allocations::slot))
        .load(&mut conn)
        .unwrap();
    assert_eq!(held.len(), 3, "{held:?}");

    let page = |after: Option<String>| {
        instances::list(
            &t.ctl,
            Bearer::new(&token),
            InstancePage {
                limit: Some(2),
                after,
            },
        )
    };
    let first = page(None).await.unwrap();
    assert_eq!(first.next.as_deref(), Some("one-gpu"));
    let second = page(first.next.clone()).await.unwrap();
    assert_eq!(second.next, None);
    let listed: Vec<cohort_proto::api::instances::Instance> = [first, second]
        .iter()
        .flat_map(|p| serde_json::from_slice::<Vec<_>>(&p.json).expect("a page's JSON"))
        .collect();
    let names: Vec<&str> = listed.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["no-gpu", "one-gpu", "two-gpus"]);
    for i in &listed {
        assert_eq!(i.owner, "admin");
        assert_eq!(i.image, "base");
        assert_eq!(i.node.as_deref(), Some("node-a"));
        assert_eq!(i.ssh_host.as_deref(), Some("127.0.0.1"));
        assert!(i.ssh_port.is_some_and(|p| (21000..=21063).contains(&p)));
        assert_eq!(i.limits.cpu, 1);
        let expected: Vec<(String, String, u32)> = held
            .iter()
            .filter(|(name, ..)| *name == i.name)
            .map(|(_, uuid, model, slot)| (uuid.clone(), model.clone(), *slot as u32))
            .collect();
        let shown: Vec<(String, String, u32)> = i
            .gpus
            .iter()
            .map(|g| (g.uuid.clone(), g.model.clone(), g.slot))
            .collect();
        assert_eq!(shown, expected, "{}", i.name);
        let got = instances::get(&t.ctl, Bearer::new(&token), i.name.clone())
            .await
            .unwrap();
        assert_eq!(&got, i, "GET of {} differs from its page", i.name);
    }
    let uuids: Vec<&str> = listed[2].gpus.iter().map(|g| g.uuid.as_str()).collect();
    assert_eq!(uuids, ["GPU-a0", "GPU-a1"]);
    assert_eq!(listed[1].gpu_usage.len(), 1);
    assert_eq!(listed[1].gpu_usage[0].gpu, "GPU-a0");
    assert_eq!(listed[1].gpu_usage[0].processes, 1);
    assert_eq!(listed[1].gpu_usage[0].memory_used_bytes, 1024);
    assert!(listed[1].gpu_active_at.is_some());
    assert_eq!(listed[1].stop_reason, None);
    assert_eq!(listed[0].stop_reason.as_deref(), Some("idle for 2h"));
    assert!(listed[0].stopped_at.is_some());
    assert!(listed[0].gpu_usage.is_empty());
}

#[derive(QueryableByName, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct FunctionDef {
    #[diesel(sql_type = diesel::sql_types::Text)]
    name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    definition: String,
}

fn function_defs(conn: &mut PgConnection, names: &[String]) -> Vec<FunctionDef> {
    let mut defs: Vec<FunctionDef> = diesel::sql_query(
        "SELECT p.proname::text AS name, pg_get_functiondef(p.oid) AS definition \
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
         WHERE n.nspname = 'public' AND p.proname = ANY($1)",
    )
    .bind::<diesel::sql_types::Array<diesel::sql_types::Text>, _>(names)
    .load(conn)
    .expect("read function definitions");
    defs.sort();
    defs
}

/// `controller/src/db/queries/placement.sql` is the one readable definition of placement: run over a
/// migrated database it changes nothing, and it names every placement function there is.
#[test]
fn the_placement_sql_is_what_the_migrations_leave() {
    let sql = include_str!("../../../controller/src/db/queries/placement.sql");
    let names: Vec<String> = sql
        .lines()
        .filter_map(|l| l.strip_prefix("CREATE OR REPLACE FUNCTION "))
        .map(|rest| {
            rest.split('(')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .collect();
    assert_eq!(
        names,
        [
            "cohort_node_fits",
            "cohort_node_load",
            "cohort_gpu_room",
            "cohort_node_free_gpus",
            "cohort_node_window",
            "cohort_node_rank",
            "cohort_place_try",
            "cohort_place_on",
            "cohort_place_class"
        ]
    );
    let t = TestController::new();
    let mut conn = t.conn();
    let migrated = function_defs(&mut conn, &names);
    assert_eq!(
        migrated.len(),
        names.len(),
        "one definition each: {migrated:?}"
    );
    diesel::connection::SimpleConnection::batch_execute(&mut conn, sql).expect("run placement.sql");
    let from_file = function_defs(&mut conn, &names);
    for (file, db) in from_file.iter().zip(&migrated) {
        assert_eq!(
            file.definition, db.definition,
            "placement.sql's {} differs from the migrations'",
            db.name
        );
    }
}

/// Issue 24: a queued instance says which resource is short, on the instance (what `cohort
/// info` and the API show) and anew on each pass of the queue, and loses the reason once placed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_instance_says_which_resource_is_short() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    let error_of = |name: &str| -> Option<String> {
        inst::table
            .filter(inst::name.eq(name))
            .select(inst::error)
            .first(&mut t.conn())
            .unwrap()
    };
    // No node yet.
    instances::create(&t.ctl, admin.clone(), request("early", 0, None, true))
        .await
        .unwrap();
    assert_eq!(
        error_of("early").as_deref(),
        Some("queued: no node is enrolled")
    );

    // One node: 4 cores (16 at the default overcommit), 8 GiB, 1 TiB of disk, one A100.
    let node = t.node("node-r", (25300, 25309), 4, 8, true);
    t.gpu(&node, "GPU-r0", 0, "A100", 1);
    place_queued(&mut t.conn(), &t.ctl.config.placement).unwrap();
    assert_eq!(error_of("early"), None, "placed: the reason goes");

    // Most of it taken: what follows could fit the node, but not now (a request no node could
    // ever hold is refused instead of queued).
    let mut filler = request("filler", 1, Some("A100"), true);
    filler.limits = Some(Limits {
        cpu: 1,
        memory_mib: 6144,
        disk_gib: 1000,
    });
    instances::create(&t.ctl, admin.clone(), filler)
        .await
        .unwrap();
    assert_eq!(error_of("filler"), None, "the filler is placed");

    let mut big_disk = request("big-disk", 0, None, true);
    big_disk.limits = Some(Limits {
        cpu: 1,
        memory_mib: 512,
        disk_gib: 100,
    });
    let mut big_memory = request("big-memory", 0, None, true);
    big_memory.limits = Some(Limits {
        cpu: 1,
        memory_mib: 4096,
        disk_gib: 1,
    });
    let gpu = request("gpu", 1, Some("A100"), true);
    for r in [big_disk, big_memory, gpu] {
        instances::create(&t.ctl, admin.clone(), r).await.unwrap();
    }
    assert_eq!(
        error_of("big-disk").as_deref(),
        Some("queued: needs 100 GiB of disk; largest free on any node: 23 GiB")
    );
    assert_eq!(
        error_of("big-memory").as_deref(),
        Some("queued: needs 4096 MiB of memory; most free on any node: 1536 MiB")
    );
    assert_eq!(
        error_of("gpu").as_deref(),
        Some("queued: needs 1 A100 GPU; most free on any node: 0")
    );

    // The node cordoned: a pass of the queue says so.
    t.set_node_state(&node, "cordoned");
    place_queued(&mut t.conn(), &t.ctl.config.placement).unwrap();
    assert_eq!(
        error_of("big-disk").as_deref(),
        Some("queued: no node is online (of 1: offline, cordoned or evacuating)")
    );
}

/// Issue 32: a class placed in one transaction while other transactions hold the least loaded
/// nodes (their own classes, not committed yet) walks past those nodes once, not on every
/// placement: after the first student, each is placed from the window of the least loaded
/// nodes, never by ranking the whole fleet (before, every student of the class was, which made
/// a class per transaction place a quarter as many a second as one per transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_in_one_transaction_walks_past_nodes_others_hold_once() {
    use cohort_controller::app::config::PlacementConfig;
    use cohort_controller::db::models::instance::NewInstance;
    use cohort_controller::placement::{self, Pass};
    use diesel::connection::SimpleConnection;

    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    let image = t.image("base");
    for n in 0..100 {
        let first = 26000 + n * 10;
        t.node(&format!("n-{n:03}"), (first, first + 9), 64, 256, false);
    }
    // Another transaction holds the 70 least loaded nodes (equal load: the lowest ids), more
    // than a window holds.
    let mut other = t.conn();
    other
        .batch_execute("BEGIN; SELECT id FROM nodes ORDER BY id LIMIT 70 FOR UPDATE;")
        .unwrap();
    let held: HashSet<i64> = nodes::table
        .select(nodes::id)
        .order(nodes::id)
        .limit(70)
        .load(&mut t.conn())
        .unwrap()
        .into_iter()
        .collect();

    let mut conn = t.conn();
    let config = PlacementConfig::default();
    let placed = conn
        .transaction(|conn| {
            (0..10)
                .map(|i| {
                    let name = format!("class-{i}");
                    let new = NewInstance {
                        name: &name,
                        owner_id: admin.user.id,
                        course_id: None,
                        image_id: image.id,
                        desired_state: DesiredState::Running,
                        observed_state: ObservedState::Queued,
                        cpu: 1,
                        memory_mib: 512,
                        disk_gib: 1,
                        gpu_count: 0,
                        gpu_model: None,
                        gpu_share: GpuShare::Shared,
                        gpu_share_count: None,
                        home_gib: 0,
                        strategy: PlacementStrategy::Spread,
                        priority: 0,
                        config: serde_json::json!({}),
                    };
                    placement::insert(conn, &new, None, &config)
                        .map(|(_, p)| p.expect("a free node"))
                })
                .collect::<QueryResult<Vec<_>>>()
        })
        .unwrap();
    other.batch_execute("ROLLBACK").unwrap();

    let passes: Vec<Pass> = placed.iter().map(|p| p.pass).collect();
    assert_eq!(passes[0], Pass::Everything, "the window was all held");
    assert!(
        passes[1..].iter().all(|p| *p == Pass::Window),
        "later students ranked the whole fleet again: {passes:?}"
    );
    // Spread as before: ten distinct nodes, none held by the other transaction.
    let nodes_used: HashSet<i64> = placed.iter().map(|p| p.node_id).collect();
    assert_eq!(nodes_used.len(), 10, "{placed:?}");
    assert!(nodes_used.is_disjoint(&held), "{placed:?}");
}

/// A class placed in one statement (`placement::insert_class`, as a course's provision places
/// its new students): each row where `insert` would put it, in the order given, every port and
/// GPU slot once, and the rows no node can hold now written queued with the reason; a class of
/// mixed shapes is placed one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_in_one_statement_spreads_takes_each_slot_once_and_queues_the_rest() {
    use cohort_controller::app::config::PlacementConfig;
    use cohort_controller::db::models::instance::NewInstance;
    use cohort_controller::placement;

    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    let image = t.image("base");
    // GPU room for 3: two exclusive-sized GPUs on a, one on b, none on c.
    let a = t.node("node-a", (28000, 28003), 64, 256, true);
    let b = t.node("node-b", (28100, 28103), 64, 256, true);
    t.node("node-c", (28200, 28203), 64, 256, true);
    t.gpu(&a, "GPU-a0", 0, "T4", 1);
    t.gpu(&a, "GPU-a1", 1, "T4", 1);
    t.gpu(&b, "GPU-b0", 0, "T4", 1);
    let names = [
        "student-0",
        "student-1",
        "student-2",
        "student-3",
        "student-4",
        "student-5",
    ];
    let owner = admin.user.id;
    let row = |name: &'static str, gpus: i32, cpu: i32| NewInstance {
        name,
        owner_id: owner,
        course_id: None,
        image_id: image.id,
        desired_state: DesiredState::Running,
        observed_state: ObservedState::Queued,
        cpu,
        memory_mib: 512,
        disk_gib: 1,
        gpu_count: gpus,
        gpu_model: None,
        gpu_share: GpuShare::Shared,
        gpu_share_count: None,
        home_gib: 0,
        strategy: PlacementStrategy::Spread,
        priority: 0,
        config: serde_json::json!({}),
    };
    let config = PlacementConfig::default();
    let class: Vec<NewInstance<'_>> = names.iter().map(|n| row(n, 1, 1)).collect();
    let placed = t
        .conn()
        .transaction(|conn| placement::insert_class(conn, &class, &config))
        .unwrap();

    assert_eq!(placed.len(), 6);
    let mut conn = t.conn();
    for ((id, _), name) in placed.iter().zip(&names) {
        let got = Instance::find(&mut conn, *id).unwrap();
        assert_eq!(&got.name, name, "results are in the order given");
    }
    // Spread: the first two on the two nodes with free GPUs, then the last GPU; the rest wait.
    let on: Vec<Option<String>> = placed
        .iter()
        .map(|(_, p)| p.as_ref().map(|p| p.node_name.clone()))
        .collect();
    assert_eq!(
        on,
        [
            Some("node-a".to_string()),
            Some("node-b".to_string()),
            Some("node-a".to_string()),
            None,
            None,
            None
        ]
    );
    let (rows, slots) = allocations(&t);
    assert_eq!(rows.len(), 3);
    let ports: HashSet<(String, i32)> = rows.iter().map(|(_, n, p)| (n.clone(), *p)).collect();
    assert_eq!(ports.len(), 3, "a port given twice: {rows:?}");
    assert_eq!(slots.values().map(Vec::len).sum::<usize>(), 3);
    assert!(slots.values().all(|s| s == &vec![0]), "{slots:?}");
    for (id, p) in &placed {
        let got = Instance::find(&mut conn, *id).unwrap();
        if p.is_none() {
            assert_eq!(got.node_id, None);
            let why = got.error.unwrap_or_default();
            assert!(why.contains("GPU"), "queued with the reason: {why}");
        } else {
            assert_eq!(got.observed_state, ObservedState::Pending);
        }
    }

    // Mixed shapes: one by one, each placed as `insert` would.
    let mixed = [row("mixed-0", 0, 1), row("mixed-1", 0, 2)];
    let placed = t
        .conn()
        .transaction(|conn| placement::insert_class(conn, &mixed, &config))
        .unwrap();
    assert!(placed.iter().all(|(_, p)| p.is_some()), "{placed:?}");
    assert_eq!(allocations(&t).0.len(), 5);
}

/// Issue 32: to spread, a class in one statement claims as many of the best nodes as it has
/// rows at once, skipping those another transaction holds without waiting for them, and gives
/// each row the best claimed node that still fits it (a class larger than its claim doubles up
/// on the least loaded); to pack, its rows fill the fullest node that fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_claims_the_best_free_nodes_at_once_and_packs_onto_the_fullest() {
    use cohort_controller::app::config::PlacementConfig;
    use cohort_controller::db::models::instance::NewInstance;
    use cohort_controller::placement::{self, Pass};
    use diesel::connection::SimpleConnection;

    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    let image = t.image("base");
    for n in 0..6 {
        let first = 29000 + n * 10;
        t.node(&format!("n-{n}"), (first, first + 9), 64, 256, false);
    }
    let names = ["s-0", "s-1", "s-2", "s-3", "s-4", "p-0", "p-1", "p-2"];
    let owner = admin.user.id;
    let row = |name: &'static str, strategy: PlacementStrategy| NewInstance {
        name,
        owner_id: owner,
        course_id: None,
        image_id: image.id,
        desired_state: DesiredState::Running,
        observed_state: ObservedState::Queued,
        cpu: 1,
        memory_mib: 512,
        disk_gib: 1,
        gpu_count: 0,
        gpu_model: None,
        gpu_share: GpuShare::Shared,
        gpu_share_count: None,
        home_gib: 0,
        strategy,
        priority: 0,
        config: serde_json::json!({}),
    };
    let config = PlacementConfig::default();
    let on = |placed: &[(i64, Option<placement::Placement>)]| -> Vec<(String, Pass)> {
        placed
            .iter()
            .map(|(_, p)| {
                let p = p.as_ref().expect("placed");
                (p.node_name.clone(), p.pass)
            })
            .collect()
    };

    // Another transaction holds the two least loaded nodes (equal load: the lowest ids).
    let mut other = t.conn();
    other
        .batch_execute("BEGIN; SELECT id FROM nodes WHERE name IN ('n-0', 'n-1') FOR UPDATE;")
        .unwrap();
    // A class that waited for them would fail here rather than hang.
    let mut conn = t.conn();
    conn.batch_execute("SET lock_timeout = '10s'").unwrap();
    let spread: Vec<NewInstance<'_>> = names[..5]
        .iter()
        .map(|n| row(n, PlacementStrategy::Spread))
        .collect();
    let placed = conn
        .transaction(|conn| placement::insert_class(conn, &spread, &config))
        .unwrap();
    other.batch_execute("ROLLBACK").unwrap();
    let window = |n: &str| (n.to_string(), Pass::Window);
    assert_eq!(
        on(&placed),
        [
            window("n-2"),
            window("n-3"),
            window("n-4"),
            window("n-5"),
            window("n-2")
        ]
    );

    // n-2 now holds the most: a packed class goes there, all of it.
    let pack: Vec<NewInstance<'_>> = names[5..]
        .iter()
        .map(|n| row(n, PlacementStrategy::Pack))
        .collect();
    let placed = conn
        .transaction(|conn| placement::insert_class(conn, &pack, &config))
        .unwrap();
    assert_eq!(on(&placed), [window("n-2"), window("n-2"), window("n-2")]);
    let (rows, _) = allocations(&t);
    let ports: HashSet<(String, i32)> = rows.iter().map(|(_, n, p)| (n.clone(), *p)).collect();
    assert_eq!(ports.len(), 8, "a port given twice: {rows:?}");
}

/// A course's new limits on a node with room for one container's growth and not another's:
/// the container that fits gets the new memory (its row, its node's counters, one operation
/// item), the one that does not keeps its own and is named with the reason, one being made is
/// left alone, and one waiting for a node takes the new size at once. Shrinking always fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_course_limits_reach_the_containers_whose_node_has_room() {
    use cohort_controller::courses::{course as courses, limits};
    use cohort_controller::db::models::instance::NewInstance;
    use cohort_proto::api::courses::CourseLimits;
    use serde_json::json;

    let t = TestController::new();
    let (prof, _) = t.user("prof", "instructor");
    let image = t.image("base");
    // 4 GiB of memory: the three containers placed on it take 3 GiB.
    let node = t.node("node1", (20000, 20099), 2, 4, false);
    t.set_node_state(&node, "online");
    let create = course("cs101", "Intro", "base");
    courses::create(&t.ctl, prof.clone(), create).await.unwrap();
    let mut conn = t.conn();
    let course_id: i64 = cohort_controller::db::schema::courses::table
        .filter(cohort_controller::db::schema::courses::code.eq("cs101"))
        .select(cohort_controller::db::schema::courses::id)
        .first(&mut conn)
        .unwrap();
    for (name, observed, port) in [
        ("cs101-ann", "running", Some(20000)),
        ("cs101-bob", "stopped", Some(20001)),
        ("cs101-cat", "queued", Some(20002)),
        ("cs101-dan", "queued", None),
    ] {
        let owner = t.user(&name[6..], "student").0;
        let made = Instance::insert(
            &mut conn,
            &NewInstance {
                name,
                owner_id: owner.user.id,
                course_id: Some(course_id),
                image_id: image.id,
                desired_state: DesiredState::Running,
                observed_state: observed.parse().unwrap(),
                cpu: 1,
                memory_mib: 1024,
                disk_gib: 10,
                gpu_count: 0,
                gpu_model: None,
                gpu_share: GpuShare::Exclusive,
                gpu_share_count: None,
                home_gib: 0,
                strategy: PlacementStrategy::Spread,
                priority: 0,
                config: json!({}),
            },
        )
        .unwrap();
        if let Some(port) = port {
            diesel::update(inst::table.find(made.id))
                .set((inst::node_id.eq(node.id), inst::ssh_port.eq(port)))
                .execute(&mut conn)
                .unwrap();
        }
    }
    let memory_of = |conn: &mut PgConnection, name: &str| -> i64 {
        inst::table
            .filter(inst::name.eq(name))
            .select(inst::memory_mib)
            .first(conn)
            .unwrap()
    };
    let node_memory = |conn: &mut PgConnection| -> i64 {
        nodes::table
            .find(node.id)
            .select(nodes::memory_used_mib)
            .first(conn)
            .unwrap()
    };
    assert_eq!(node_memory(&mut conn), 3072);

    let grow = CourseLimits {
        memory_mib: Some(2048),
        ..Default::default()
    };
    let change = limits::set(&t.ctl, prof.clone(), "cs101".into(), grow)
        .await
        .unwrap();
    let op = change.operation.expect("an operation for ann");
    let targets: Vec<&str> = op.items.iter().map(|i| i.target.as_str()).collect();
    assert_eq!(targets, ["cs101-ann"]);
    let kept: Vec<(&str, &str)> = change
        .kept
        .iter()
        .map(|k| (k.instance.as_str(), k.reason.as_str()))
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(kept[0].0, "cs101-bob");
    assert!(kept[0].1.contains("no room"), "{kept:?}");
    assert_eq!(kept[1].0, "cs101-cat");
    assert!(kept[1].1.contains("queued"), "{kept:?}");
    assert!(
        change.note.contains("1 waiting for a node"),
        "{}",
        change.note
    );
    assert_eq!(memory_of(&mut conn, "cs101-ann"), 2048);
    assert_eq!(memory_of(&mut conn, "cs101-bob"), 1024);
    assert_eq!(memory_of(&mut conn, "cs101-cat"), 1024);
    assert_eq!(memory_of(&mut conn, "cs101-dan"), 2048);
    assert_eq!(node_memory(&mut conn), 4096, "the node counts ann's growth");

    let shrink = CourseLimits {
        memory_mib: Some(512),
        ..Default::default()
    };
    let change = limits::set(&t.ctl, prof, "cs101".into(), shrink)
        .await
        .unwrap();
    let op = change.operation.expect("an operation");
    let mut targets: Vec<&str> = op.items.iter().map(|i| i.target.as_str()).collect();
    targets.sort();
    assert_eq!(targets, ["cs101-ann", "cs101-bob"]);
    assert_eq!(node_memory(&mut conn), 512 + 512 + 1024);
    assert_eq!(memory_of(&mut conn, "cs101-dan"), 512);
}
