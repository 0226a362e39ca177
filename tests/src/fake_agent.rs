//! What a fake agent (`gpu_node::GpuNode`, the worker tests' `FakeAgents`) says to the calls its
//! tests never make: `unused_agent_calls!()` inside an `impl NodeAgent` writes them, each failing
//! with `unused()` of the calling module. The trait has no default bodies, so the controller's
//! real client must answer every call, checked when it compiles.

/// The `NodeAgent` methods about moves, live limits, exec (sessions and one-shot), files,
/// snapshots, JupyterLab and certificate renewal, each answering the module's `unused()`; and
/// [`idle_activity`]'s answer to the activity question, as a node whose containers do nothing.
#[macro_export]
macro_rules! unused_agent_calls {
    () => {
        $crate::unused_agent_calls!(no_activity);
        fn activity(
            &self,
            name: String,
            _: u32,
        ) -> cohort_controller::agent_client::AgentFuture<cohort_proto::activity::InstanceActivity>
        {
            $crate::fake_agent::idle_activity(name)
        }
    };
    (no_activity) => {
        $crate::unused_agent_calls!(no_activity_no_exec);
        fn exec(
            &self,
            _: String,
            _: cohort_proto::agent::ExecRequest,
        ) -> cohort_controller::agent_client::AgentFuture<cohort_proto::agent::ExecResult> {
            unused()
        }
    };
    // The GPU node answers a batch job's execs itself.
    (no_activity_no_exec) => {
        fn restore_home_path(
            &self,
            _: String,
            _: cohort_proto::agent::RestoreHomePath,
        ) -> cohort_controller::agent_client::AgentFuture<()> {
            unused()
        }
        fn check_home_path(
            &self,
            _: String,
            _: cohort_proto::agent::RestoreHomePath,
        ) -> cohort_controller::agent_client::AgentFuture<()> {
            unused()
        }
        fn restore_home(
            &self,
            _: String,
            _: cohort_proto::agent::RestoreHome,
        ) -> cohort_controller::agent_client::AgentFuture<()> {
            unused()
        }
        fn home_snapshots(
            &self,
            _: String,
        ) -> cohort_controller::agent_client::AgentFuture<Vec<cohort_proto::agent::HomeSnapshot>> {
            unused()
        }
        fn set_home_snapshots(
            &self,
            _: String,
            _: cohort_proto::agent::HomeSnapshotSchedule,
        ) -> cohort_controller::agent_client::AgentFuture<()> {
            unused()
        }
        fn export_instance(
            &self,
            _: String,
        ) -> cohort_controller::agent_client::AgentFuture<
            cohort_controller::agent_client::AgentStream,
        > {
            unused()
        }
        fn import_instance(
            &self,
            _: String,
            _: cohort_controller::agent_client::AgentStream,
        ) -> cohort_controller::agent_client::AgentFuture<()> {
            unused()
        }
        fn export_volume(
            &self,
            _: String,
        ) -> cohort_controller::agent_client::AgentFuture<
            cohort_controller::agent_client::AgentStream,
        > {
            unused()
        }
        fn import_volume(
            &self,
            _: String,
            _: cohort_controller::agent_client::AgentStream,
        ) -> cohort_controller::agent_client::AgentFuture<()> {
            unused()
        }
        fn arrive(
            &self,
            _: String,
            _: cohort_proto::agent::Arrival,
        ) -> cohort_controller::agent_client::AgentFuture<cohort_proto::agent::Instance> {
            unused()
        }
        fn set_limits(
            &self,
            _: String,
            _: cohort_proto::agent::LiveLimits,
        ) -> cohort_controller::agent_client::AgentFuture<cohort_proto::agent::Instance> {
            unused()
        }
        fn start_exec_session(
            &self,
            _: String,
            _: cohort_proto::agent::ExecSessionRequest,
        ) -> cohort_controller::agent_client::AgentFuture<cohort_proto::agent::ExecSession> {
            unused()
        }
        fn exec_session_state(
            &self,
            _: String,
            _: u32,
        ) -> cohort_controller::agent_client::AgentFuture<cohort_proto::agent::ExecSessionState> {
            unused()
        }
        fn exec_session_socket(
            &self,
            _: String,
            _: String,
        ) -> cohort_controller::agent_client::AgentFuture<
            cohort_controller::agent_client::AgentSocket,
        > {
            unused()
        }
        fn jupyter_tunnel(
            &self,
            _: String,
        ) -> cohort_controller::agent_client::AgentFuture<cohort_controller::agent_client::Tunnel> {
            unused()
        }
        fn identity(
            &self,
        ) -> cohort_controller::agent_client::AgentFuture<cohort_proto::agent::IdentityInfo> {
            unused()
        }
        fn identity_csr(
            &self,
        ) -> cohort_controller::agent_client::AgentFuture<cohort_proto::agent::IdentityCsr> {
            unused()
        }
        fn install_certificate(
            &self,
            _: cohort_proto::agent::InstallCertificate,
        ) -> cohort_controller::agent_client::AgentFuture<cohort_proto::agent::IdentityInfo> {
            unused()
        }
        fn import_dataset(
            &self,
            _: cohort_proto::agent::ImportDataset,
        ) -> cohort_controller::agent_client::AgentFuture<()> {
            unused()
        }
        fn set_datasets(
            &self,
            _: String,
            _: cohort_proto::agent::InstanceDatasets,
        ) -> cohort_controller::agent_client::AgentFuture<()> {
            unused()
        }
        fn prune_datasets(
            &self,
            _: cohort_proto::agent::PruneDatasets,
        ) -> cohort_controller::agent_client::AgentFuture<Vec<String>> {
            unused()
        }
        fn exec_stream(
            &self,
            _: String,
            _: cohort_proto::agent::ExecRequest,
            _: u64,
        ) -> cohort_controller::agent_client::AgentFuture<
            cohort_controller::agent_client::AgentStream,
        > {
            unused()
        }
        fn get_file(
            &self,
            _: String,
            _: String,
            _: u64,
        ) -> cohort_controller::agent_client::AgentFuture<
            cohort_controller::agent_client::FileDownload,
        > {
            unused()
        }
        fn put_file(
            &self,
            _: String,
            _: String,
            _: Vec<u8>,
            _: cohort_controller::agent_client::FileMeta,
        ) -> cohort_controller::agent_client::AgentFuture<()> {
            unused()
        }
        fn snapshots(
            &self,
            _: String,
        ) -> cohort_controller::agent_client::AgentFuture<Vec<cohort_proto::agent::Snapshot>> {
            unused()
        }
        fn create_snapshot(
            &self,
            _: String,
            _: cohort_proto::agent::CreateSnapshot,
        ) -> cohort_controller::agent_client::AgentFuture<cohort_proto::agent::Snapshot> {
            unused()
        }
        fn restore_snapshot(
            &self,
            _: String,
            _: String,
        ) -> cohort_controller::agent_client::AgentFuture<()> {
            unused()
        }
        fn delete_snapshot(
            &self,
            _: String,
            _: String,
        ) -> cohort_controller::agent_client::AgentFuture<()> {
            unused()
        }
    };
}

/// A node's answer to the activity question about a container that does nothing: no terminal
/// input, no busy process, no JupyterLab.
pub fn idle_activity(
    _name: String,
) -> cohort_controller::agent_client::AgentFuture<cohort_proto::activity::InstanceActivity> {
    Box::pin(async { Ok(cohort_proto::activity::InstanceActivity::default()) })
}
