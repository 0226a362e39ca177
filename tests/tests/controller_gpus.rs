//! Issue 24, GPUs as LXD takes them and as courses share them, against the real database with
//! the controller's real poller, placement, queue, worker and reclaimer; the node's agent is
//! faked at its trait seam ([`GpuNode`]) and reports the GPUs of the test NVML library, since
//! no GPU exists here.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cohort_controller::actions::instances;
use cohort_controller::models::operation::Operation;
use cohort_controller::{poller, worker};
use cohort_e2e::controller::TestController;
use cohort_e2e::gpu_node::GpuNode;
use cohort_e2e::observe::build_fake_nvml;
use cohort_proto::agent::{CreateInstance, Gpu};
use cohort_proto::api::instances::{CreateInstance as ApiCreate, GpuShare, PlacementStrategy};

fn request(name: &str, gpus: u32) -> ApiCreate {
    ApiCreate {
        name: name.into(),
        image: "base".into(),
        limits: None,
        gpus,
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

/// Waits until every operation is final.
async fn all_final(t: &TestController, within: Duration) -> Vec<Operation> {
    let deadline = Instant::now() + within;
    loop {
        let ops = Operation::list(&mut t.conn(), None).unwrap();
        if ops
            .iter()
            .all(|o| o.status != "pending" && o.status != "running")
        {
            return ops;
        }
        assert!(Instant::now() < deadline, "operations unfinished: {ops:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The GPU cards a `gpu` device of LXD 5.0.2 selects (lxd/device/gpu.go's `gpuSelected`: a card
/// is selected unless a `vendorid`, `pci`, `productid` or `id` key is set and differs), after
/// the device's own checks (lxd/device/gpu_mig.go's `validateConfig`: `pci` excludes `id`,
/// `productid` and `vendorid`; `mig.uuid` excludes `mig.gi` and `mig.ci`, and without it both
/// are needed). A MIG device starts only when exactly one card is selected ("More than one GPU
/// matched the MIG device" otherwise).
fn lxd_selected_cards<'a>(dev: &BTreeMap<String, String>, cards: &'a [Gpu]) -> Vec<&'a Gpu> {
    let key = |k: &str| dev.get(k).map(String::as_str).unwrap_or("");
    if !key("pci").is_empty() {
        for k in ["id", "productid", "vendorid"] {
            assert!(key(k).is_empty(), "LXD refuses {k:?} with pci: {dev:?}");
        }
    }
    if key("mig.uuid").is_empty() {
        assert!(
            !key("mig.gi").is_empty() && !key("mig.ci").is_empty(),
            "LXD needs mig.uuid or both mig.gi and mig.ci: {dev:?}"
        );
    } else {
        for k in ["mig.gi", "mig.ci"] {
            assert!(
                key(k).is_empty(),
                "LXD refuses {k:?} with mig.uuid: {dev:?}"
            );
        }
    }
    // The test NVML library reports no vendor, product or DRM id a device could name.
    for k in ["vendorid", "productid", "id"] {
        assert!(key(k).is_empty(), "unexpected {k:?}: {dev:?}");
    }
    cards
        .iter()
        .filter(|c| key("pci").is_empty() || c.pci_address == key("pci"))
        .collect()
}

/// Issue 24: on a node of two GPUs in MIG mode, every MIG instance the controller hands out
/// reaches LXD as a `gputype=mig` device that selects exactly its parent card.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mig_devices_on_a_node_of_two_gpus_select_their_parent_card() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_fake_nvml(dir.path());
    std::env::set_var("FAKE_NVML_ALL_MIG", "1");
    let node = GpuNode::new(&lib);
    let cards = node.gpus.gpus.clone();
    assert!(
        cards.len() == 2 && cards.iter().all(|c| c.mig_enabled),
        "two GPUs in MIG mode: {cards:#?}"
    );
    let parent_of: BTreeMap<String, String> = cards
        .iter()
        .flat_map(|c| {
            c.mig_devices
                .iter()
                .map(|m| (m.uuid.clone(), c.pci_address.clone()))
        })
        .collect();
    assert_eq!(parent_of.len(), 3, "{parent_of:?}");

    let t = TestController::with_agents(Arc::new(node.clone()));
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    t.node("mig-node", (26000, 26009), 64, 256, true);
    poller::poll_all(&t.ctl).await;
    tokio::spawn(worker::run(t.ctl.clone()));
    for name in ["mig-a", "mig-b", "mig-c"] {
        instances::create(&t.ctl, admin.clone(), request(name, 1))
            .await
            .unwrap();
    }
    let ops = all_final(&t, Duration::from_secs(60)).await;
    assert!(ops.iter().all(|o| o.status == "success"), "{ops:#?}");

    let creates: Vec<CreateInstance> = node.calls().creates.clone();
    assert_eq!(creates.len(), 3);
    let mut handed_out = BTreeSet::new();
    for req in &creates {
        let plan = cohort_agent::instances::spec::plan(req, "default")
            .unwrap_or_else(|e| panic!("the agent refuses {}: {e}", req.name));
        let devices: BTreeMap<String, BTreeMap<String, String>> =
            serde_json::from_value(plan.body["devices"].clone()).unwrap();
        let gpus: Vec<_> = devices
            .iter()
            .filter(|(_, d)| d.get("type").map(String::as_str) == Some("gpu"))
            .collect();
        assert_eq!(gpus.len(), 1, "{}: {devices:?}", req.name);
        let (_, dev) = gpus[0];
        assert_eq!(dev["gputype"], "mig", "{dev:?}");
        let uuid = dev["mig.uuid"].clone();
        let selected = lxd_selected_cards(dev, &cards);
        assert_eq!(
            selected.len(),
            1,
            "{}: LXD would find {} cards for {dev:?}",
            req.name,
            selected.len()
        );
        assert_eq!(
            Some(&selected[0].pci_address),
            parent_of.get(&uuid),
            "{}: the card LXD picks is not {uuid}'s parent",
            req.name
        );
        handed_out.insert(uuid);
    }
    assert_eq!(handed_out.len(), 3, "every MIG instance, each once");
}
