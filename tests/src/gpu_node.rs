//! A GPU node for controller tests on a machine without a GPU: the agent faked at its trait seam
//! ([`NodeAgent`]), the one place a fake is allowed. Its inventory's GPUs are what the agent's
//! own NVML code reads from the test NVML library (`agent/testdata/fake_nvml.c`); it records
//! every create, state change and detach the controller asks of it and keeps each instance's
//! status, so the poller sees the node as the worker left it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine;
use cohort_controller::agent_client::{
    AgentConnector, AgentError, AgentFuture, AgentTarget, NodeAgent, ReceivedTarball,
};
use cohort_proto::agent::{
    AttachGpus, CreateInstance, ExecRequest, ExecResult, GpuAttachment, GpuInventory, HostFacts,
    Image, ImportImage, Instance, Inventory, LxdFacts, PublishInstance, SshAccess, StateAction,
    StateChange, UpdateInstance,
};

/// What the controller asked of the node.
#[derive(Debug, Default)]
pub struct Calls {
    pub creates: Vec<CreateInstance>,
    pub state_changes: Vec<(String, StateAction)>,
    pub detached: Vec<String>,
    pub attached: Vec<(String, Vec<GpuAttachment>)>,
    /// Every state change, detach and attach in order, e.g. `stop id-s1`, `detach id-s1`.
    pub events: Vec<String>,
    /// Instance name -> LXD status (`Running`, `Stopped`).
    pub instances: BTreeMap<String, String>,
    /// What the node answers when asked about a container's activity, by name: `None` is no
    /// answer (an error, as past the controller's wait); a container not named does nothing.
    pub activity: BTreeMap<String, Option<cohort_proto::activity::InstanceActivity>>,
    /// Batch jobs as the containers run them, by job id: `None` while running, the exit code
    /// once ended (a test ends one by setting it; a stop ends it with 143, as TERM does).
    pub jobs: BTreeMap<String, Option<i32>>,
    /// The jobs' execs in order: `start 3`, `stop 3`, `tell 3: <line>`.
    pub job_events: Vec<String>,
    /// While set, the jobs' execs fail as a node that does not answer.
    pub jobs_unreachable: bool,
    /// What the controller wrote to a container's terminals (its `cohort-notice` exec), in
    /// order: (instance, text).
    pub notices: Vec<(String, String)>,
}

/// Every node the controller connects to is this one (a test has one GPU node).
#[derive(Clone)]
pub struct GpuNode {
    pub calls: Arc<Mutex<Calls>>,
    pub gpus: GpuInventory,
}

impl GpuNode {
    /// A node whose GPUs are what NVML (the library at `nvml`, one copy per test) reports:
    /// with `all_mig`, both of its GPUs in MIG mode. The library reads `$FAKE_NVML_ALL_MIG` when
    /// first loaded, so tests of one process set it and load theirs one at a time.
    pub fn new(nvml: &std::path::Path, all_mig: bool) -> Self {
        static LOADING: Mutex<()> = Mutex::new(());
        let gpus = {
            let _one = LOADING.lock().unwrap_or_else(|p| p.into_inner());
            std::env::set_var("FAKE_NVML_ALL_MIG", if all_mig { "1" } else { "0" });
            cohort_agent::gpu::inventory(Some(nvml))
        };
        assert_eq!(gpus.unavailable, None, "the test NVML library loads");
        GpuNode {
            calls: Arc::default(),
            gpus,
        }
    }

    /// The uuid of the test NVML library's one L40S (what the on-demand and reclaim tests lease).
    pub fn l40s(&self) -> String {
        self.gpus
            .gpus
            .iter()
            .find(|g| g.name == "NVIDIA L40S")
            .expect("the L40S")
            .uuid
            .clone()
    }

    pub fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl AgentConnector for GpuNode {
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
        ssh_host_key: None,
        address: None,
        created_at: None,
        ssh_ready: false,
        state: None,
        config: BTreeMap::new(),
        devices: BTreeMap::new(),
    }
}

fn status_verb(action: StateAction) -> &'static str {
    match action {
        StateAction::Start => "start",
        StateAction::Stop => "stop",
        StateAction::Restart => "restart",
    }
}

fn unused<T: Send + 'static>() -> AgentFuture<T> {
    Box::pin(async { Err(AgentError::Decode("not used by the GPU tests".into())) })
}

impl GpuNode {
    /// What a container says to the controller's batch job execs (`cohort-job-<action>` as
    /// `$0`, the job id the first argument): the job's life is the test's to decide. A notice
    /// for the container's terminals (`cohort-notice`) is kept.
    fn job_exec(&self, name: &str, request: &ExecRequest) -> Result<ExecResult, AgentError> {
        let arg = |i: usize| request.command.get(i).cloned().unwrap_or_default();
        let action = arg(3);
        if action == "cohort-notice" {
            self.calls().notices.push((name.to_string(), arg(4)));
            return Ok(ExecResult {
                exit_code: 0,
                stdout_base64: String::new(),
                stderr_base64: String::new(),
            });
        }
        let Some(action) = action.strip_prefix("cohort-job-") else {
            return Err(AgentError::Decode("not used by the GPU tests".into()));
        };
        let id = arg(6);
        let mut calls = self.calls();
        if calls.jobs_unreachable {
            return Err(AgentError::Decode(
                "the node does not answer (the test's)".into(),
            ));
        }
        let out = match action {
            "start" => {
                calls.jobs.entry(id.clone()).or_insert(None);
                calls.job_events.push(format!("start {id}"));
                String::new()
            }
            "status" => match calls.jobs.get(&id) {
                Some(None) => "running".into(),
                Some(Some(code)) => format!("exit {code}"),
                None => "absent".into(),
            },
            "stop" => {
                if let Some(state @ None) = calls.jobs.get_mut(&id) {
                    *state = Some(143);
                }
                calls.job_events.push(format!("stop {id}"));
                String::new()
            }
            "tell" => {
                calls.job_events.push(format!("tell {id}: {}", arg(7)));
                String::new()
            }
            _ => String::new(),
        };
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        Ok(ExecResult {
            exit_code: 0,
            stdout_base64: b64(&out),
            stderr_base64: String::new(),
        })
    }
}

impl NodeAgent for GpuNode {
    crate::unused_agent_calls!(no_activity_no_exec);
    fn exec(&self, name: String, request: ExecRequest) -> AgentFuture<ExecResult> {
        let answer = self.job_exec(&name, &request);
        Box::pin(async move { answer })
    }
    fn activity(
        &self,
        name: String,
        _: u32,
    ) -> AgentFuture<cohort_proto::activity::InstanceActivity> {
        match self.calls().activity.get(&name).cloned() {
            None => crate::fake_agent::idle_activity(name),
            Some(Some(seen)) => Box::pin(async move { Ok(seen) }),
            Some(None) => Box::pin(async move {
                Err(AgentError::Decode(format!(
                    "{name}: no answer (the test's node)"
                )))
            }),
        }
    }
    fn inventory(&self) -> AgentFuture<Inventory> {
        let gpus = self.gpus.clone();
        Box::pin(async move {
            Ok(Inventory {
                node_name: "gpu-node".into(),
                host: HostFacts {
                    hostname: "gpu-node".into(),
                    kernel: "test".into(),
                    cores: 64,
                    memory_bytes: 256 << 30,
                    disk_free_bytes: 1 << 40,
                    disk_total_bytes: 1 << 40,
                },
                lxd: LxdFacts {
                    daemon: "lxd".into(),
                    version: "5.0.2".into(),
                    project: "default".into(),
                    storage_pool: "default".into(),
                    storage_driver: "dir".into(),
                    pool_used_bytes: 0,
                    pool_total_bytes: 0,
                },
                gpus,
                nvidia_runtime: true,
                images: vec![],
                network: None,
            })
        })
    }
    fn list_instances(&self) -> AgentFuture<Vec<Instance>> {
        let calls = self.calls.clone();
        Box::pin(async move {
            let c = calls.lock().unwrap_or_else(|p| p.into_inner());
            Ok(c.instances.iter().map(|(n, s)| instance(n, s)).collect())
        })
    }
    fn create_instance(&self, request: CreateInstance) -> AgentFuture<Instance> {
        let calls = self.calls.clone();
        Box::pin(async move {
            let mut c = calls.lock().unwrap_or_else(|p| p.into_inner());
            let status = if request.start { "Running" } else { "Stopped" };
            c.instances.insert(request.name.clone(), status.into());
            let made = instance(&request.name, status);
            c.creates.push(request);
            Ok(made)
        })
    }
    fn get_instance(&self, name: String) -> AgentFuture<Instance> {
        let calls = self.calls.clone();
        Box::pin(async move {
            let c = calls.lock().unwrap_or_else(|p| p.into_inner());
            match c.instances.get(&name) {
                Some(status) => Ok(instance(&name, status)),
                None => Err(AgentError::Status {
                    status: 404,
                    code: "not_found".into(),
                    message: format!("no instance {name}"),
                    field: None,
                }),
            }
        })
    }
    fn change_state(&self, name: String, change: StateChange) -> AgentFuture<Instance> {
        let calls = self.calls.clone();
        Box::pin(async move {
            let mut c = calls.lock().unwrap_or_else(|p| p.into_inner());
            let status = match change.action {
                StateAction::Stop => "Stopped",
                StateAction::Start | StateAction::Restart => "Running",
            };
            c.instances.insert(name.clone(), status.into());
            c.events
                .push(format!("{} {name}", status_verb(change.action)));
            c.state_changes.push((name.clone(), change.action));
            Ok(instance(&name, status))
        })
    }
    fn delete_instance(&self, name: String) -> AgentFuture<()> {
        let calls = self.calls.clone();
        Box::pin(async move {
            calls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .instances
                .remove(&name);
            Ok(())
        })
    }
    fn detach_gpus(&self, name: String) -> AgentFuture<Instance> {
        let calls = self.calls.clone();
        Box::pin(async move {
            let mut c = calls.lock().unwrap_or_else(|p| p.into_inner());
            c.detached.push(name.clone());
            c.events.push(format!("detach {name}"));
            let status = c.instances.get(&name).cloned().unwrap_or_default();
            Ok(instance(&name, &status))
        })
    }
    fn attach_gpus(&self, name: String, request: AttachGpus) -> AgentFuture<Instance> {
        let calls = self.calls.clone();
        Box::pin(async move {
            let mut c = calls.lock().unwrap_or_else(|p| p.into_inner());
            let status = c.instances.get(&name).cloned().unwrap_or_default();
            c.attached.push((name.clone(), request.gpus));
            c.events.push(format!("attach {name}"));
            Ok(instance(&name, &status))
        })
    }
    fn import_image(&self, request: ImportImage) -> AgentFuture<Image> {
        Box::pin(async move {
            Ok(Image {
                fingerprint: request.fingerprint,
                aliases: vec![request.alias],
                description: String::new(),
                size_bytes: 1,
                gpu_ready: true,
            })
        })
    }
    fn set_network_policy(
        &self,
        _: String,
        _: cohort_proto::agent::NetworkPolicy,
    ) -> AgentFuture<Instance> {
        unused()
    }
    fn update_instance(&self, _: String, _: UpdateInstance) -> AgentFuture<Instance> {
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
        Box::pin(async { Err(AgentError::Decode("no SSH on the GPU test node".into())) })
    }
    fn delete_volume(&self, _: String) -> AgentFuture<()> {
        Box::pin(async { Ok(()) })
    }
}
