//! The job worker against the real database, with the agent faked at its trait seam (the one
//! place a unit-level test may): an expired claim is resumed by another worker, finished items
//! are never run again, two controllers run side by side doing each item once, transient agent
//! errors are retried with backoff and permanent ones fail the item.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cohort_controller::agent_client::{
    AgentConnector, AgentError, AgentFuture, AgentTarget, NodeAgent, ReceivedTarball,
};
use cohort_controller::db::models::operation::Operation;
use cohort_controller::db::models::operation_item::OperationItem;
use cohort_controller::instances::manage as instances;
use cohort_controller::jobs::worker;
use cohort_e2e::controller::TestController;
use cohort_proto::agent::{
    AttachGpus, CreateInstance, Image, ImportImage, Instance, Inventory, PublishInstance,
    SshAccess, StateAction, StateChange, UpdateInstance,
};
use cohort_proto::api::instances::{
    CreateInstance as ApiCreate, GpuShare, InstanceStateChange, PlacementStrategy,
};
use cohort_proto::api::operations::{OperationKind, OperationStatus};

/// What the fake agent was asked, and failures to inject by instance name.
#[derive(Default)]
struct Calls {
    creates: Vec<String>,
    state_changes: Vec<String>,
    transient_failures: HashMap<String, u32>,
    refused: Vec<String>,
    /// Refused creates that leave their container behind: name -> the create's key.
    left_behind: HashMap<String, String>,
    /// Names whose create answers 409: a container of that name is already there.
    taken: Vec<String>,
    /// Deletes that fail this many more times, by name.
    failing_deletes: HashMap<String, u32>,
    deletes: Vec<String>,
    /// Login pushes (`set_ssh`) that fail this many more times, unreachable.
    ssh_failures: u32,
    /// Instances whose login push was answered, in order.
    ssh_pushes: Vec<String>,
}

#[derive(Clone, Default)]
struct FakeAgents(Arc<Mutex<Calls>>);

impl AgentConnector for FakeAgents {
    fn connect(&self, _: &AgentTarget) -> Result<Arc<dyn NodeAgent>, AgentError> {
        Ok(Arc::new(self.clone()))
    }
}

fn instance(name: &str, status: &str) -> Instance {
    Instance {
        name: name.into(),
        status: status.into(),
        idempotency_key: None,
        limits: None,
        gpus: vec![],
        ssh_port: None,
        ssh_listen: None,
        address: None,
        ssh_host_key: None,
        created_at: None,
        ssh_ready: false,
        state: None,
        config: BTreeMap::new(),
        devices: BTreeMap::new(),
    }
}

fn unused<T: Send + 'static>() -> AgentFuture<T> {
    Box::pin(async { Err(AgentError::Decode("not used by these tests".into())) })
}

impl NodeAgent for FakeAgents {
    cohort_e2e::unused_agent_calls!();
    fn create_instance(&self, request: CreateInstance) -> AgentFuture<Instance> {
        let calls = self.0.clone();
        Box::pin(async move {
            let mut c = calls.lock().unwrap();
            if c.taken.contains(&request.name) {
                return Err(AgentError::Status {
                    status: 409,
                    code: "conflict".into(),
                    message: format!("an instance named {} already exists", request.name),
                    field: Some("name".into()),
                });
            }
            if c.refused.contains(&request.name) {
                if c.left_behind.contains_key(&request.name) {
                    c.left_behind
                        .insert(request.name.clone(), request.idempotency_key.clone());
                }
                return Err(AgentError::Status {
                    status: 400,
                    code: "invalid_field".into(),
                    message: "no".into(),
                    field: None,
                });
            }
            if let Some(n) = c
                .transient_failures
                .get_mut(&request.name)
                .filter(|n| **n > 0)
            {
                *n -= 1;
                return Err(AgentError::Unreachable("connection refused".into()));
            }
            c.creates.push(request.idempotency_key.clone());
            Ok(instance(&request.name, "Running"))
        })
    }
    fn change_state(&self, name: String, change: StateChange) -> AgentFuture<Instance> {
        let calls = self.0.clone();
        Box::pin(async move {
            calls.lock().unwrap().state_changes.push(name.clone());
            let now = match change.action {
                StateAction::Stop => "Stopped",
                _ => "Running",
            };
            Ok(instance(&name, now))
        })
    }
    fn import_image(&self, request: ImportImage) -> AgentFuture<Image> {
        Box::pin(async move {
            Ok(Image {
                fingerprint: request.fingerprint,
                aliases: vec![request.alias],
                description: String::new(),
                size_bytes: 1,
                gpu_ready: false,
            })
        })
    }
    fn delete_instance(&self, name: String) -> AgentFuture<()> {
        let calls = self.0.clone();
        Box::pin(async move {
            let mut c = calls.lock().unwrap();
            c.deletes.push(name.clone());
            if let Some(n) = c.failing_deletes.get_mut(&name).filter(|n| **n > 0) {
                *n -= 1;
                return Err(AgentError::Unreachable("connection reset".into()));
            }
            c.left_behind.remove(&name);
            Ok(())
        })
    }
    fn update_instance(&self, _: String, _: UpdateInstance) -> AgentFuture<Instance> {
        unused()
    }
    fn detach_gpus(&self, _: String) -> AgentFuture<Instance> {
        unused()
    }
    fn attach_gpus(&self, _: String, _: AttachGpus) -> AgentFuture<Instance> {
        unused()
    }
    fn publish(
        &self,
        _: String,
        _: PublishInstance,
        _: std::path::PathBuf,
    ) -> AgentFuture<ReceivedTarball> {
        unused()
    }
    fn set_ssh(&self, name: String, _: SshAccess) -> AgentFuture<Instance> {
        let calls = self.0.clone();
        Box::pin(async move {
            let mut c = calls.lock().unwrap();
            if c.ssh_failures > 0 {
                c.ssh_failures -= 1;
                return Err(AgentError::Unreachable("connection reset".into()));
            }
            c.ssh_pushes.push(name.clone());
            Ok(instance(&name, "Running"))
        })
    }
    fn set_network_policy(
        &self,
        _: String,
        _: cohort_proto::agent::NetworkPolicy,
    ) -> AgentFuture<Instance> {
        unused()
    }
    fn delete_volume(&self, _: String) -> AgentFuture<()> {
        Box::pin(async { Ok(()) })
    }
    fn inventory(&self) -> AgentFuture<Inventory> {
        unused()
    }
    fn list_instances(&self) -> AgentFuture<Vec<Instance>> {
        unused()
    }
    fn get_instance(&self, name: String) -> AgentFuture<Instance> {
        let calls = self.0.clone();
        Box::pin(async move {
            let c = calls.lock().unwrap();
            match c.left_behind.get(&name) {
                Some(key) if !key.is_empty() => Ok(Instance {
                    idempotency_key: Some(key.clone()),
                    ..instance(&name, "Stopped")
                }),
                _ => Err(AgentError::Status {
                    status: 404,
                    code: "not_found".into(),
                    message: format!("no instance {name}"),
                    field: None,
                }),
            }
        })
    }
}

fn request(name: &str) -> ApiCreate {
    ApiCreate {
        name: name.into(),
        image: "base".into(),
        limits: None,
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

fn setup(agents: &FakeAgents) -> TestController {
    let t = TestController::with_agents(Arc::new(agents.clone()));
    t.image("base");
    t.node("node-a", (25000, 25063), 64, 256, false);
    t
}

/// Waits until every operation is final; returns them.
async fn all_final(t: &TestController, within: Duration) -> Vec<Operation> {
    let deadline = Instant::now() + within;
    loop {
        let ops = Operation::list(&mut t.conn(), None).unwrap();
        if ops
            .iter()
            .all(|o| o.status != OperationStatus::Pending && o.status != OperationStatus::Running)
        {
            return ops;
        }
        assert!(
            Instant::now() < deadline,
            "operations still open: {:?}",
            ops.iter()
                .map(|o| (&o.target, &o.status))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_expired_claim_is_resumed_and_finished_items_never_run_again() {
    let agents = FakeAgents::default();
    let t = setup(&agents);
    let (admin, _) = t.user("admin", "admin");
    for name in ["one", "two", "three"] {
        instances::create(&t.ctl, admin.clone(), request(name))
            .await
            .unwrap();
    }
    // A worker that dies right after claiming: its lease (3 s) must run out before anyone else
    // touches the operation.
    let mut conn = t.conn();
    let dead = Operation::claim(&mut conn, "dead-worker", chrono::Duration::seconds(3))
        .unwrap()
        .unwrap();
    // An evacuation-like operation whose first item already succeeded before its worker died.
    let ids: Vec<i64> = ["one", "two"]
        .iter()
        .map(|n| {
            cohort_controller::db::models::instance::Instance::by_name(&mut conn, n)
                .unwrap()
                .unwrap()
                .id
        })
        .collect();
    let stop = cohort_controller::jobs::enqueue(
        &mut conn,
        &cohort_controller::jobs::Job::EvacuateNode(cohort_controller::jobs::payload::Evacuate {
            policy: cohort_controller::jobs::StepKind::EvacuateStop,
        }),
        Some(admin.user.id),
        "node-a",
        &[
            cohort_controller::jobs::Step::new(
                cohort_controller::jobs::StepKind::Stop,
                "one",
                Some(ids[0]),
            ),
            cohort_controller::jobs::Step::new(
                cohort_controller::jobs::StepKind::Stop,
                "two",
                Some(ids[1]),
            ),
        ],
        None,
    )
    .unwrap();
    let first = OperationItem::for_operation(&mut conn, stop.id)
        .unwrap()
        .remove(0);
    OperationItem::finish(&mut conn, first.id, OperationStatus::Success, None).unwrap();

    let started = Instant::now();
    let live = tokio::spawn(worker::run(t.ctl.clone()));
    let ops = all_final(&t, Duration::from_secs(30)).await;
    live.abort();
    assert!(
        ops.iter().all(|o| o.status == OperationStatus::Success),
        "{ops:?}"
    );
    let resumed = ops.iter().find(|o| o.id == dead.id).unwrap();
    assert!(
        resumed.finished_at.unwrap() - dead.created_at >= chrono::Duration::seconds(2),
        "resumed before the lease ran out"
    );
    assert!(started.elapsed() >= Duration::from_secs(2));

    let calls = agents.0.lock().unwrap();
    let mut keys = calls.creates.clone();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 3, "three creates");
    assert_eq!(
        calls.creates.len(),
        3,
        "an item ran twice: {:?}",
        calls.creates
    );
    assert_eq!(calls.state_changes, ["two"], "the finished item ran again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_controllers_on_one_database_do_each_item_once() {
    let agents = FakeAgents::default();
    let t = setup(&agents);
    let (admin, _) = t.user("admin", "admin");
    for i in 0..20 {
        instances::create(&t.ctl, admin.clone(), request(&format!("c-{i}")))
            .await
            .unwrap();
    }
    let second = t.another_process("test-worker-2");
    let a = tokio::spawn(worker::run(t.ctl.clone()));
    let b = tokio::spawn(worker::run(second));
    let ops = all_final(&t, Duration::from_secs(60)).await;
    a.abort();
    b.abort();
    assert_eq!(ops.len(), 20);
    assert!(ops.iter().all(|o| o.status == OperationStatus::Success));
    let calls = agents.0.lock().unwrap();
    let mut keys = calls.creates.clone();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 20);
    assert_eq!(calls.creates.len(), 20, "some item was created twice");
    let workers: std::collections::HashSet<Option<String>> =
        ops.iter().map(|o| o.claimed_by.clone()).collect();
    assert_eq!(
        workers,
        [None].into_iter().collect(),
        "finished operations keep no claim"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transient_errors_are_retried_and_permanent_ones_fail_the_item() {
    let agents = FakeAgents::default();
    agents
        .0
        .lock()
        .unwrap()
        .transient_failures
        .insert("flaky".into(), 2);
    agents.0.lock().unwrap().refused.push("doomed".into());
    let t = setup(&agents);
    let (admin, _) = t.user("admin", "admin");
    let flaky = instances::create(&t.ctl, admin.clone(), request("flaky"))
        .await
        .unwrap();
    let doomed = instances::create(&t.ctl, admin.clone(), request("doomed"))
        .await
        .unwrap();
    let live = tokio::spawn(worker::run(t.ctl.clone()));
    let ops = all_final(&t, Duration::from_secs(30)).await;
    live.abort();
    let status = |id| ops.iter().find(|o| o.id == id).unwrap().status;
    assert_eq!(status(flaky.id), OperationStatus::Success);
    assert_eq!(status(doomed.id), OperationStatus::Failure);
    let mut conn = t.conn();
    let item = OperationItem::for_operation(&mut conn, flaky.id)
        .unwrap()
        .remove(0);
    assert_eq!(item.attempts, 3, "two failures, then success");
    let failed = OperationItem::for_operation(&mut conn, doomed.id)
        .unwrap()
        .remove(0);
    assert_eq!(failed.attempts, 1, "a refusal is not retried");
    assert!(failed.error.unwrap().contains("400"));
    let row = Operation::find(&mut conn, doomed.id).unwrap().unwrap();
    let view = cohort_controller::views::operation(&mut conn, &row).unwrap();
    assert_eq!(view.status, OperationStatus::Failure);
    assert_eq!(view.progress.failed, 1);
}

/// Issue 47, item 20: a create that failed for good and whose container could not be removed
/// keeps its node, so that deleting the instance removes the container there instead of
/// reporting success and leaving it behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_create_whose_container_stays_is_deleted_on_its_node() {
    use cohort_controller::db::models::instance::Instance as Row;
    let agents = FakeAgents::default();
    {
        let mut c = agents.0.lock().unwrap();
        c.refused.push("stuck".into());
        c.left_behind.insert("stuck".into(), String::new());
        c.failing_deletes.insert("stuck".into(), 1);
    }
    let t = setup(&agents);
    let (admin, _) = t.user("admin", "admin");
    let made = instances::create(&t.ctl, admin.clone(), request("stuck"))
        .await
        .unwrap();
    let live = tokio::spawn(worker::run(t.ctl.clone()));
    let ops = all_final(&t, Duration::from_secs(30)).await;
    assert_eq!(
        ops.iter().find(|o| o.id == made.id).unwrap().status,
        OperationStatus::Failure
    );
    let row = Row::by_name(&mut t.conn(), "stuck").unwrap().expect("row");
    assert!(
        row.node_id.is_some(),
        "a failed create whose container stayed let go of its node"
    );
    assert_eq!(
        agents.0.lock().unwrap().deletes,
        ["stuck"],
        "one try at the leftover"
    );

    let deleting = instances::delete(&t.ctl, admin, "stuck".into(), true)
        .await
        .unwrap();
    let ops = all_final(&t, Duration::from_secs(30)).await;
    live.abort();
    assert_eq!(
        ops.iter().find(|o| o.id == deleting.id).unwrap().status,
        OperationStatus::Success
    );
    let c = agents.0.lock().unwrap();
    assert_eq!(c.deletes, ["stuck", "stuck"], "the delete went to the node");
    assert!(
        !c.left_behind.contains_key("stuck"),
        "the container is gone"
    );
    assert!(Row::by_name(&mut t.conn(), "stuck").unwrap().is_none());
}

/// A step or an operation kind the code does not know (written by a newer controller, or by
/// hand) is an error naming the value when read: it is never taken for another step or kind,
/// as `views.rs` once made an unknown kind `create_instance`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_step_or_operation_kind_is_an_error_when_read() {
    use diesel::RunQueryDsl;
    let t = setup(&FakeAgents::default());
    let mut conn = t.conn();
    let op = cohort_controller::jobs::enqueue(
        &mut conn,
        &cohort_controller::jobs::Job::DeleteInstance(Default::default()),
        None,
        "nothing",
        &[cohort_controller::jobs::Step::new(
            cohort_controller::jobs::StepKind::Delete,
            "nothing",
            None,
        )],
        None,
    )
    .unwrap();
    let read = OperationItem::for_operation(&mut conn, op.id).unwrap();
    assert_eq!(read[0].action, cohort_controller::jobs::StepKind::Delete);

    diesel::sql_query(format!(
        "UPDATE operation_items SET action = 'defragment' WHERE operation_id = '{}'",
        op.id
    ))
    .execute(&mut conn)
    .unwrap();
    // diesel names the field; the cause names the value.
    let chain = |e: &dyn std::error::Error| {
        let mut text = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            text += &format!(": {c}");
            cause = c.source();
        }
        text
    };
    let e = OperationItem::for_operation(&mut conn, op.id).unwrap_err();
    assert!(
        chain(&e).contains("'action': \"defragment\" is not a step kind"),
        "{}",
        chain(&e)
    );

    diesel::sql_query(format!(
        "UPDATE operations SET kind = 'defragment_node' WHERE id = '{}'",
        op.id
    ))
    .execute(&mut conn)
    .unwrap();
    let e = Operation::find(&mut conn, op.id).unwrap_err();
    assert!(
        chain(&e).contains("'kind': \"defragment_node\" is not an operation kind"),
        "{}",
        chain(&e)
    );
}

/// Issue 42, defect 4: a repair of drift that was not there (a create enqueued, with a new key,
/// for a container a finished create already made, as a stale poll did) meets the name taken.
/// The container is the instance's own (its key is that earlier create's item), so the repair is
/// done and the instance keeps its node, port and GPU slot: nothing is freed for another to take.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_repair_meeting_the_instances_own_container_keeps_its_port_and_gpu() {
    use cohort_controller::db::models::instance::Instance as Row;
    use cohort_controller::db::schema::gpu_allocations;
    use cohort_controller::jobs::{enqueue, payload, Job, Step, StepKind};
    use diesel::prelude::*;

    let agents = FakeAgents::default();
    let t = TestController::with_agents(Arc::new(agents.clone()));
    t.image("base");
    let node = t.node("node-g", (25100, 25163), 64, 256, true);
    t.gpu(&node, "GPU-own-0", 0, "A100", 1);
    let (admin, _) = t.user("admin", "admin");
    let with_gpu = ApiCreate {
        gpus: 1,
        gpu_share: GpuShare::Exclusive,
        ..request("own")
    };
    instances::create(&t.ctl, admin, with_gpu).await.unwrap();
    let live = tokio::spawn(worker::run(t.ctl.clone()));
    all_final(&t, Duration::from_secs(30)).await;
    let mut conn = t.conn();
    let before = Row::by_name(&mut conn, "own").unwrap().unwrap();
    let slots = |conn: &mut diesel::PgConnection| -> i64 {
        gpu_allocations::table
            .filter(gpu_allocations::instance_id.eq(before.id))
            .count()
            .get_result(conn)
            .unwrap()
    };
    assert_eq!(slots(&mut conn), 1, "the create took the GPU");
    {
        let mut c = agents.0.lock().unwrap();
        let made_by = c.creates[0].clone();
        c.taken.push("own".into());
        c.left_behind.insert("own".into(), made_by);
    }
    let repair = enqueue(
        &mut conn,
        &Job::CreateInstance(payload::Create {
            repair: Some("drift".into()),
        }),
        None,
        "own",
        &[Step::new(StepKind::Create, "own", Some(before.id))],
        None,
    )
    .unwrap();
    let ops = all_final(&t, Duration::from_secs(30)).await;
    live.abort();
    let repaired = ops.iter().find(|o| o.id == repair.id).unwrap();
    assert_eq!(repaired.status, OperationStatus::Success, "{repaired:?}");
    let after = Row::by_name(&mut conn, "own").unwrap().unwrap();
    assert_eq!(
        (after.node_id, after.ssh_port, after.error.clone()),
        (before.node_id, before.ssh_port, None),
        "the instance kept its node and port"
    );
    assert_eq!(slots(&mut conn), 1, "the instance kept its GPU slot");
    assert_eq!(agents.0.lock().unwrap().creates.len(), 1, "made once");
}

/// Keys removed while a container was stopped reach it when it starts: a login push that fails
/// right after the start is not only logged; an `apply_logins` operation retries it until it
/// applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_login_a_start_could_not_apply_is_retried_as_its_own_operation() {
    let agents = FakeAgents::default();
    let t = setup(&agents);
    let (admin, _) = t.user("admin", "admin");
    instances::create(&t.ctl, admin.clone(), request("keyed"))
        .await
        .unwrap();
    let live = tokio::spawn(worker::run(t.ctl.clone()));
    all_final(&t, Duration::from_secs(30)).await;
    let change = |action| InstanceStateChange {
        action,
        force: false,
        timeout_s: None,
    };
    instances::change_state(
        &t.ctl,
        admin.clone(),
        "keyed".into(),
        change(StateAction::Stop),
    )
    .await
    .unwrap();
    all_final(&t, Duration::from_secs(30)).await;
    agents.0.lock().unwrap().ssh_failures = 1;
    instances::change_state(
        &t.ctl,
        admin.clone(),
        "keyed".into(),
        change(StateAction::Start),
    )
    .await
    .unwrap();
    let ops = all_final(&t, Duration::from_secs(60)).await;
    live.abort();
    let retries: Vec<&Operation> = ops
        .iter()
        .filter(|o| o.kind == OperationKind::ApplyLogins)
        .collect();
    assert_eq!(
        retries.len(),
        1,
        "one apply_logins operation retries the failed push: {:?}",
        ops.iter().map(|o| (o.kind, &o.status)).collect::<Vec<_>>()
    );
    assert_eq!(
        retries[0].status,
        OperationStatus::Success,
        "{:?}",
        retries[0]
    );
    assert_eq!(
        retries[0].target, "admin",
        "named after the owner whose login it applies"
    );
    assert_eq!(
        agents.0.lock().unwrap().ssh_pushes,
        ["keyed"],
        "the retry applied the login"
    );
}
