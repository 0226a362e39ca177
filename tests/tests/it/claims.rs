//! Issue 42, defect 1: a lease belongs to one claim. Two controllers share a database; the first
//! claims a create whose step is slow, then loses its database (every pooled connection held,
//! as an outage does) for longer than the lease. The second takes the operation over once the
//! lease has run out on the database's clock. The first must stop its step before that and
//! write nothing when its database comes back: the create is done, and recorded, by one run
//! only. (The agent is faked at its trait seam: what is tested is the worker's own fencing.)

use std::collections::BTreeMap;
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
    SshAccess, StateChange, UpdateInstance,
};
use cohort_proto::api::instances::{CreateInstance as ApiCreate, GpuShare, PlacementStrategy};
use cohort_proto::api::operations::OperationStatus;

/// How long a create takes on the fake node: longer than a lease (3 s in tests).
const SLOW_CREATE: Duration = Duration::from_secs(6);

/// Creates begun and creates that ran to their end, by idempotency key.
#[derive(Default)]
struct Creates {
    begun: Vec<String>,
    finished: Vec<String>,
}

#[derive(Clone, Default)]
struct SlowAgents(Arc<Mutex<Creates>>);

impl AgentConnector for SlowAgents {
    fn connect(&self, _: &AgentTarget) -> Result<Arc<dyn NodeAgent>, AgentError> {
        Ok(Arc::new(self.clone()))
    }
}

fn unused<T: Send + 'static>() -> AgentFuture<T> {
    Box::pin(async { Err(AgentError::Decode("not used by this test".into())) })
}

impl NodeAgent for SlowAgents {
    cohort_e2e::unused_agent_calls!();
    fn create_instance(&self, request: CreateInstance) -> AgentFuture<Instance> {
        let creates = self.0.clone();
        Box::pin(async move {
            let key = request.idempotency_key.clone();
            creates.lock().unwrap().begun.push(key.clone());
            // A run whose step is dropped never gets past this point.
            tokio::time::sleep(SLOW_CREATE).await;
            creates.lock().unwrap().finished.push(key);
            Ok(Instance {
                name: request.name,
                status: "Running".into(),
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
            })
        })
    }
    fn change_state(&self, _: String, _: StateChange) -> AgentFuture<Instance> {
        unused()
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
    fn delete_instance(&self, _: String) -> AgentFuture<()> {
        unused()
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
    fn set_ssh(&self, _: String, _: SshAccess) -> AgentFuture<Instance> {
        unused()
    }
    fn set_network_policy(
        &self,
        _: String,
        _: cohort_proto::agent::NetworkPolicy,
    ) -> AgentFuture<Instance> {
        unused()
    }
    fn delete_volume(&self, _: String) -> AgentFuture<()> {
        unused()
    }
    fn inventory(&self) -> AgentFuture<Inventory> {
        unused()
    }
    fn list_instances(&self) -> AgentFuture<Vec<Instance>> {
        unused()
    }
    fn get_instance(&self, _: String) -> AgentFuture<Instance> {
        unused()
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

async fn until(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what} did not happen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_that_lost_its_database_past_the_lease_stops_and_writes_nothing() {
    let agents = SlowAgents::default();
    let t = TestController::with_agents(Arc::new(agents.clone()));
    t.image("base");
    t.node("node-a", (25000, 25063), 64, 256, false);
    let (admin, _) = t.user("admin", "admin");
    let made = instances::create(&t.ctl, admin, request("fenced"))
        .await
        .unwrap();

    // The first controller, with a pool of two connections the test can take from it.
    let first = t.another_configured("worker-first", |c| c.database.pool_size = 2);
    let first_worker = tokio::spawn(worker::run(first.clone()));
    until("the first run's create", Duration::from_secs(15), || {
        agents.0.lock().unwrap().begun.len() == 1
    })
    .await;
    // Its database goes away: every connection of its pool is held elsewhere.
    let pool = first.pool.clone();
    let outage = tokio::task::spawn_blocking(move || {
        (0..pool.max_size())
            .map(|_| pool.get().expect("a connection of the first pool"))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();

    // The second controller takes the operation over once the lease ran out, and finishes it.
    let second = t.another_process("worker-second");
    let second_worker = tokio::spawn(worker::run(second));
    let deadline = Instant::now() + Duration::from_secs(30);
    let done = loop {
        let op = Operation::find(&mut t.conn(), made.id).unwrap().unwrap();
        if op.status != OperationStatus::Running && op.status != OperationStatus::Pending {
            break op;
        }
        assert!(Instant::now() < deadline, "never finished: {op:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    second_worker.abort();
    assert_eq!(done.status, OperationStatus::Success, "{done:?}");

    // The first controller's database comes back: whatever it still had to write is refused.
    drop(outage);
    tokio::time::sleep(Duration::from_secs(2)).await;
    first_worker.abort();

    let creates = agents.0.lock().unwrap();
    assert_eq!(
        creates.begun.len(),
        2,
        "the second run began its own create: {:?}",
        creates.begun
    );
    assert_eq!(
        creates.finished.len(),
        1,
        "the create ran to its end twice: the first run kept going after its lease was lost"
    );
    let after = Operation::find(&mut t.conn(), made.id).unwrap().unwrap();
    assert_eq!(
        (after.status, after.finished_at, after.claim_token),
        (done.status, done.finished_at, None),
        "the first run wrote after it lost its claim"
    );
    let item = OperationItem::for_operation(&mut t.conn(), made.id)
        .unwrap()
        .remove(0);
    assert_eq!(item.status, OperationStatus::Success);
    assert_eq!(item.attempts, 2, "one attempt per run, none recorded after");
}
