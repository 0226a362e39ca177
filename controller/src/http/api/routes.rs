//! The one route table of `/api/v1`: each route declared once with its method, path, handler,
//! summary, request and answer schemas, status and whether it needs a caller. The router
//! ([`register`]) and the OpenAPI document (`crate::http::openapi`) both read it, so neither can
//! name a route the other lacks.

use actix_web::http::Method;
use actix_web::web;
use cohort_proto::api as p;
use cohort_proto::enroll::{EnrollRequest, EnrollResponse};
use schemars::gen::SchemaGenerator;
use schemars::JsonSchema;
use serde_json::Value;

use super::{
    audit, batch_jobs, course_archives, course_data, courses, gpu_leases, gpus, images, instances,
    lxd_trust, meta, nodes, operations, orphans, usage, users,
};

/// A JSON schema of a body, made by the document's generator.
pub type SchemaFn = fn(&mut SchemaGenerator) -> Value;

/// One route of `/api/v1`.
pub struct Route {
    pub method: Method,
    /// Below `/api/v1`.
    pub path: &'static str,
    /// Gives the route for `method` its handler.
    pub handler: fn(actix_web::Route) -> actix_web::Route,
    pub summary: &'static str,
    /// The JSON request body; `None`: none, or not JSON (raw files, tarballs, rosters).
    pub request: Option<SchemaFn>,
    /// The status of success.
    pub status: u16,
    /// The JSON answer; `None`: none, or not JSON.
    pub response: Option<SchemaFn>,
    pub authenticated: bool,
}

fn schema<T: JsonSchema>(gen: &mut SchemaGenerator) -> Value {
    serde_json::to_value(gen.subschema_for::<T>()).unwrap_or(Value::Null)
}

macro_rules! schema_of {
    () => {
        None
    };
    ($t:ty) => {
        Some(schema::<$t> as SchemaFn)
    };
}

macro_rules! authenticated {
    (public) => {
        false
    };
    (auth) => {
        true
    };
}

/// `METHOD "path" => handler, public|auth, "summary", (request) -> status (answer);`
macro_rules! routes {
    ($($method:ident $path:literal => $handler:path, $auth:ident, $summary:literal,
        ($($request:ty)?) -> $status:literal ($($response:ty)?);)*) => {
        vec![$(Route {
            method: Method::$method,
            path: $path,
            handler: |route| route.to($handler),
            summary: $summary,
            request: schema_of!($($request)?),
            status: $status,
            response: schema_of!($($response)?),
            authenticated: authenticated!($auth),
        }),*]
    };
}

/// Adds every route of the table to `scope`, in the table's order (the first match wins).
pub fn register(scope: actix_web::Scope) -> actix_web::Scope {
    routes().into_iter().fold(scope, |scope, route| {
        scope.route(route.path, (route.handler)(web::method(route.method)))
    })
}

/// Every route of `/api/v1`, in the order they are matched.
pub fn routes() -> Vec<Route> {
    routes! {
        GET "/openapi.json" => meta::openapi, public,
            "This OpenAPI document",
            () -> 200 ();
        GET "/ca" => nodes::ca, public,
            "The Cohort CA certificate (PEM)",
            () -> 200 ();
        POST "/enroll" => nodes::enroll, public,
            "Enroll a node with a join token",
            (EnrollRequest) -> 200 (EnrollResponse);
        GET "/me" => users::me, auth,
            "The caller, their instances and SSH keys",
            () -> 200 (p::users::Me);
        GET "/me/gpu-budgets" => users::my_gpu_budgets, auth,
            "The caller's GPU budgets in the current period, one per budgeted course they are enrolled in: hours of the course, granted, used",
            () -> 200 (Vec<p::courses::StudentBudget>);
        POST "/me/ssh-keys" => users::add_ssh_key, auth,
            "Add an SSH key",
            (p::users::AddSshKey) -> 201 (p::users::SshKey);
        DELETE "/me/ssh-keys/{id}" => users::delete_ssh_key, auth,
            "Remove an SSH key",
            () -> 204 ();
        GET "/users" => users::list, auth,
            "List users (instructor, admin)",
            () -> 200 (Vec<p::users::User>);
        POST "/users" => users::create, auth,
            "Create a user (admin)",
            (p::users::CreateUser) -> 201 (p::users::User);
        DELETE "/users/{username}" => users::delete, auth,
            "Delete a user; ?instances=keep (default) or delete (admin)",
            () -> 200 (p::users::UserDeleted);
        POST "/users/{username}/disable" => users::disable, auth,
            "Disable a user: tokens refused, SSH logins removed (admin)",
            () -> 200 (p::users::User);
        POST "/users/{username}/enable" => users::enable, auth,
            "Enable a disabled user (admin)",
            () -> 200 (p::users::User);
        PUT "/users/{username}/role" => users::set_role, auth,
            "Change a user's role (admin; not one's own)",
            (p::users::SetRole) -> 200 (p::users::User);
        GET "/users/{username}/tokens" => users::list_tokens, auth,
            "List a user's API tokens (the user, admin)",
            () -> 200 (Vec<p::users::ApiToken>);
        POST "/users/{username}/tokens" => users::issue_token, auth,
            "Issue an API token",
            (p::users::CreateApiToken) -> 201 (p::users::ApiTokenIssued);
        DELETE "/users/{username}/tokens/{id}" => users::revoke_token, auth,
            "Revoke an API token (the user, admin)",
            () -> 204 ();
        GET "/nodes" => nodes::list, auth,
            "List nodes (instructor, admin)",
            () -> 200 (Vec<p::nodes::Node>);
        POST "/nodes/tokens" => nodes::create_token, auth,
            "Issue a join token (admin)",
            (p::nodes::CreateJoinToken) -> 201 (p::nodes::JoinTokenIssued);
        GET "/nodes/{name}" => nodes::get, auth,
            "One node",
            () -> 200 (p::nodes::Node);
        DELETE "/nodes/{name}" => nodes::remove, auth,
            "Remove a node and revoke its certificate (admin)",
            () -> 204 ();
        POST "/nodes/{name}/cordon" => nodes::cordon, auth,
            "Take a node out of placement (admin)",
            () -> 200 (p::nodes::Node);
        POST "/nodes/{name}/evacuate" => nodes::evacuate, auth,
            "Stop a node's instances, or move them with their data (admin)",
            (p::nodes::EvacuateNode) -> 202 (p::operations::Operation);
        POST "/nodes/{name}/restore" => nodes::restore, auth,
            "Put a node back into placement, moving back what it moved away (admin)",
            () -> 202 (p::operations::Operation);
        GET "/orphans" => orphans::list, auth,
            "Containers found on nodes without a record in Cohort (admin)",
            () -> 200 (Vec<p::orphans::Orphan>);
        DELETE "/orphans/{node}/{name}" => orphans::delete, auth,
            "Delete an orphan container from its node (admin)",
            () -> 204 ();
        POST "/orphans/{node}/{name}/adopt" => orphans::adopt, auth,
            "Make an orphan container an instance of an owner (admin)",
            (p::orphans::AdoptOrphan) -> 204 ();
        POST "/jobs" => batch_jobs::submit, auth,
            "Submit a batch job: a command run in the caller's own container, as them, once its turn comes (with a GPU lease when it asks for GPUs)",
            (p::batch_jobs::SubmitJob) -> 201 (p::batch_jobs::Job);
        GET "/jobs" => batch_jobs::list, auth,
            "The batch jobs the caller may see, newest first; ?course=, ?user=, ?state= narrow them",
            () -> 200 (Vec<p::batch_jobs::Job>);
        GET "/jobs/{id}" => batch_jobs::show, auth,
            "One batch job: its state, place and why it waits, node, GPU, times, exit code, GPU-seconds",
            () -> 200 (p::batch_jobs::Job);
        GET "/jobs/{id}/log" => batch_jobs::log, auth,
            "A batch job's output (stdout and stderr) from ?offset= (bytes), read in its container",
            () -> 200 (p::batch_jobs::JobLog);
        POST "/jobs/{id}/cancel" => batch_jobs::cancel, auth,
            "Cancel a batch job: a waiting one at once, a running one is stopped (TERM, then KILL after 10 s)",
            () -> 200 (p::batch_jobs::Job);
        PUT "/jobs/{id}/priority" => batch_jobs::set_priority, auth,
            "Move a batch job up or down its queue, -100 to 100 (its course's staff, admin; audited)",
            (p::batch_jobs::JobPriority) -> 200 (p::batch_jobs::Job);
        PUT "/courses/{code}/job-limits" => batch_jobs::set_limits, auth,
            "Set each student's batch jobs running (default 1) and waiting (default 5) at once (its instructor, staff, admin)",
            (p::courses::CourseJobLimits) -> 200 (p::courses::CourseJobLimits);
        GET "/gpu-leases" => gpu_leases::list, auth,
            "The open GPU leases and queued requests the caller may see, queued ones with their place and why (fair share)",
            () -> 200 (Vec<p::gpu_leases::GpuLease>);
        POST "/instances/{name}/gpu-lease" => gpu_leases::request, auth,
            "Ask for a GPU for a container of an on-demand course, for hours (default 2, at most the course's gpu_lease_max_hours); queued with its place when none is free",
            (p::gpu_leases::GpuLeaseRequest) -> 200 (p::gpu_leases::GpuLease);
        GET "/instances/{name}/gpu-lease" => gpu_leases::show, auth,
            "The container's latest GPU lease or request",
            () -> 200 (p::gpu_leases::GpuLease);
        DELETE "/instances/{name}/gpu-lease" => gpu_leases::release, auth,
            "Give the container's leased GPU back early, or leave the queue",
            () -> 200 (p::gpu_leases::GpuLease);
        PUT "/courses/{code}/gpu-mode" => gpu_leases::set_mode, auth,
            "Set how a course's containers get GPUs: pinned (default) or on-demand, with gpu_lease_max_hours (its instructor, staff, admin)",
            (p::courses::CourseGpuMode) -> 200 (p::courses::Course);
        GET "/gpus" => gpus::list, auth,
            "List GPUs (instructor, admin)",
            () -> 200 (Vec<p::gpus::Gpu>);
        PATCH "/gpus/{uuid}" => gpus::update, auth,
            "Set a GPU's share limit (admin)",
            (p::gpus::UpdateGpu) -> 200 (p::gpus::Gpu);
        GET "/images" => images::list, auth,
            "List images",
            () -> 200 (Vec<p::images::Image>);
        POST "/images" => images::import, auth,
            "Import an image tarball (admin; query alias, description, gpu_ready, jupyter)",
            () -> 201 (p::images::Image);
        POST "/images/publish" => images::publish, auth,
            "Publish a stopped instance as an image (instructor, admin)",
            (p::images::PublishImage) -> 202 (p::operations::Operation);
        GET "/images/{name}" => images::get, auth,
            "One image by alias or fingerprint",
            () -> 200 (p::images::Image);
        DELETE "/images/{name}" => images::delete, auth,
            "Delete an unused image (admin)",
            () -> 204 ();
        PATCH "/images/{name}" => images::rename, auth,
            "Give the image a new alias, e.g. promote an image an instructor published under \
                     their own name into the shared names (admin)",
            (p::images::ImagePatch) -> 200 (p::images::Image);
        GET "/images/{name}/tarball" => images::tarball, auth,
            "The tarball (node certificate or admin)",
            () -> 200 ();
        POST "/images/{name}/distribute" => images::distribute, auth,
            "Have every online node lacking the image fetch it now (instructor, admin)",
            () -> 202 (p::images::ImageDistribution);
        GET "/instances" => instances::list, auth,
            "One page of the instances the caller may see, by name; query limit (1-1000, \
                     default 1000) and after (the last name of the previous page); a Link header \
                     with rel=\"next\" names the next page",
            () -> 200 (Vec<p::instances::Instance>);
        POST "/instances" => instances::create, auth,
            "Create an instance (placed or queued)",
            (p::instances::CreateInstance) -> 202 (p::operations::Operation);
        GET "/instances/{name}" => instances::get, auth,
            "One instance",
            () -> 200 (p::instances::Instance);
        DELETE "/instances/{name}" => instances::delete, auth,
            "Delete an instance (query force)",
            () -> 202 (p::operations::Operation);
        PATCH "/instances/{name}" => instances::update, auth,
            "Set or unset config keys; add or remove devices (admin)",
            (p::instances::UpdateInstance) -> 200 (p::instances::LiveConfig);
        GET "/instances/{name}/config" => instances::live_config, auth,
            "Config and devices as the node's LXD holds them",
            () -> 200 (p::instances::LiveConfig);
        GET "/instances/{name}/reclaim-warnings" => instances::reclaim_warnings, auth,
            "The reclaims announced to the container's student and not yet done (idle stop or GPU detach, longest run, GPU lease end, GPU budget detach), with when each is due",
            () -> 200 (Vec<p::instances::ReclaimWarning>);
        POST "/instances/{name}/keep-working" => instances::keep_working, auth,
            "Postpone the reclaims announced to the caller's container by one more idle window (the warning's minutes for the longest run and a lease end, never past the course's longest lease), once per warning; a budget cannot be postponed; 409 saying why when nothing could be",
            () -> 200 (Vec<p::instances::ReclaimWarning>);
        PUT "/instances/{name}/state" => instances::change_state, auth,
            "Start, stop or restart",
            (p::instances::InstanceStateChange) -> 202 (p::operations::Operation);
        POST "/instances/{name}/gpus/attach-again" => instances::attach_gpus_again, auth,
            "Attach a GPU again to a running container the reclaimer took its GPUs from (idle detach, or a budget since granted more): its slots taken again on its node, waiting with the reason when none is free; 409 saying why where it holds them, is stopped, is on demand (ask for a lease) or its budget is used up",
            () -> 202 (p::operations::Operation);
        POST "/instances/{name}/move" => instances::move_instance, auth,
            "Move to another node with its root disk and home (admin)",
            (p::instances::MoveInstance) -> 202 (p::operations::Operation);
        POST "/instances/{name}/exec" => instances::exec, auth,
            "Run a command to completion",
            (p::instances::ExecRequest) -> 200 (p::instances::ExecResult);
        GET "/instances/{name}/files" => instances::get_file, auth,
            "Read a file (query path)",
            () -> 200 ();
        PUT "/instances/{name}/files" => instances::put_file, auth,
            "Write a file (query path; raw body)",
            () -> 204 ();
        GET "/instances/{name}/snapshots" => instances::snapshots, auth,
            "List snapshots",
            () -> 200 (Vec<p::instances::Snapshot>);
        GET "/instances/{name}/home/snapshots" => instances::home_snapshots, auth,
            "The snapshots of a course container's home volume, oldest first (its student, the course's staff, admins)",
            () -> 200 (Vec<p::instances::HomeSnapshot>);
        POST "/instances/{name}/home/restore" => instances::restore_home, auth,
            "Restore a course container's home volume from one of its snapshots, whole (the container is stopped around it when running, and started again)",
            (p::instances::RestoreHomeRequest) -> 202 (p::operations::Operation);
        POST "/instances/{name}/snapshots" => instances::create_snapshot, auth,
            "Take a snapshot",
            (p::instances::CreateSnapshot) -> 201 (p::instances::Snapshot);
        POST "/instances/{name}/snapshots/{snapshot}/restore" => instances::restore_snapshot, auth,
            "Restore a snapshot",
            () -> 204 ();
        DELETE "/instances/{name}/snapshots/{snapshot}" => instances::delete_snapshot, auth,
            "Delete a snapshot",
            () -> 204 ();
        GET "/courses" => courses::list, auth,
            "Courses the caller teaches, takes or (admin) all",
            () -> 200 (Vec<p::courses::Course>);
        POST "/courses" => courses::create, auth,
            "Create a course (instructor, admin)",
            (p::courses::CreateCourse) -> 201 (p::courses::Course);
        GET "/courses/{code}" => courses::get, auth,
            "One course",
            () -> 200 (p::courses::Course);
        DELETE "/courses/{code}" => courses::delete, auth,
            "Remove a torn-down course (its instructor or an admin); refused while it holds \
             archived homes unless ?archives=delete",
            () -> 204 ();
        PUT "/courses/{code}/quota" => courses::set_quota, auth,
            "Set a course's quota (admin)",
            (p::courses::CourseQuota) -> 200 (p::courses::Course);
        PUT "/courses/{code}/home" => courses::set_home, auth,
            "Set the size of a course's home volumes (home_mib; null: the default); applied to each home when its container is next made",
            (p::courses::CourseHome) -> 200 (p::courses::Course);
        PUT "/courses/{code}/limits" => courses::set_limits, auth,
            "Set each student's cpu, memory_mib and disk_gib (a field left out is kept); containers made from now on take them, those already made keep theirs and are listed in kept",
            (p::courses::CourseLimits) -> 200 (p::courses::CourseLimitsChange);
        PUT "/courses/{code}/home/snapshots" => courses::set_home_snapshots, auth,
            "Set the daemon's snapshots of each student's home: home_snapshots off, daily or hourly, home_snapshots_keep 1 to 100 (a field left out is kept); homes already made take it through the operation answered",
            (p::courses::CourseHomeSnapshots) -> 200 (p::courses::CourseHomeSnapshotsChange);
        PUT "/courses/{code}/jupyter" => courses::set_jupyter, auth,
            "Let a course's instructors open its students' JupyterLab through the portal (instructors: true), or only each student (false, the default)",
            (p::courses::CourseJupyter) -> 200 (p::courses::Course);
        PUT "/courses/{code}/budget" => courses::set_budget, auth,
            "Set a course's GPU budget: gpu_hours_per_student per budget_period (week, month, course), counted on allocated GPU time; null hours remove it (its instructor, staff, admin)",
            (p::courses::CourseBudget) -> 200 (p::courses::Course);
        POST "/courses/{code}/grants" => courses::grant_hours, auth,
            "Grant one student extra GPU hours for the current budget period, audited (its instructor, staff, admin)",
            (p::courses::GrantHours) -> 200 (p::courses::StudentBudget);
        PUT "/courses/{code}/reclaim-warning" => courses::set_reclaim_warning, auth,
            "Set the minutes (0 to 1440, default 10) between a student's warning and the idle stop, idle GPU detach or longest-run stop it announces (its instructor, staff, admin)",
            (p::courses::CourseReclaimWarning) -> 200 (p::courses::Course);
        PUT "/courses/{code}/network" => courses::set_network, auth,
            "Set a course's network policy (egress, ssh_from); applied to its running containers at once",
            (p::courses::NetworkPolicy) -> 200 (p::courses::Course);
        POST "/courses/{code}/roster" => courses::import_roster, auth,
            "Import a roster (raw CSV or JSON body)",
            () -> 200 (p::courses::RosterReport);
        GET "/courses/{code}/students" => courses::students, auth,
            "The course's students and their containers",
            () -> 200 (Vec<p::courses::Student>);
        DELETE "/courses/{code}/students/{username}" => courses::remove_student, auth,
            "Remove a student and delete their container; their home volume is kept unless query delete_home=true",
            () -> 202 (p::operations::Operation);
        PUT "/courses/{code}/staff/{username}" => courses::add_staff, auth,
            "Give an instructor the course's instructor rights but deleting it and its quota (its instructor, admin)",
            () -> 200 (p::courses::Course);
        DELETE "/courses/{code}/staff/{username}" => courses::remove_staff, auth,
            "Take a staff member's rights on the course away (its instructor, admin)",
            () -> 200 (p::courses::Course);
        POST "/courses/{code}/copy" => courses::copy, auth,
            "Make next term's course from this one: its settings and staff, no students (its instructor, admin)",
            (p::courses::CopyCourse) -> 201 (p::courses::Course);
        // Before `{action}`, which would otherwise take `password` and `snapshots`.
        POST "/courses/{code}/students/{username}/password" => courses::reissue_password, auth,
            "Issue a roster-made student without own credentials a new password (shown once)",
            () -> 201 (p::courses::IssuedPassword);
        GET "/courses/{code}/students/{username}/snapshots" => courses::student_snapshots, auth,
            "Snapshots of a student's container",
            () -> 200 (Vec<p::instances::Snapshot>);
        POST "/courses/{code}/students/{username}/snapshots" => courses::student_snapshot, auth,
            "Snapshot a student's container (name optional: default by the time)",
            (p::courses::StudentSnapshot) -> 201 (p::instances::Snapshot);
        POST "/courses/{code}/students/{username}/snapshots/{snapshot}/restore" => courses::student_restore, auth,
            "Restore a student's container to a snapshot",
            () -> 204 ();
        POST "/courses/{code}/students/{username}/{action}" => courses::student_action, auth,
            "reset, start, stop or restart a student's container",
            () -> 202 (p::operations::Operation);
        POST "/courses/{code}/provision" => courses::provision, auth,
            "Make every student's container (idempotent)",
            () -> 202 (p::operations::Operation);
        GET "/courses/{code}/endpoints" => courses::endpoints, auth,
            "SSH endpoints export (query format=csv|json|ssh-config|known-hosts)",
            () -> 200 ();
        POST "/courses/{code}/teardown" => courses::teardown, auth,
            "Stop or delete every container of the course",
            (p::courses::Teardown) -> 202 (p::operations::Operation);
        GET "/courses/{code}/data" => course_data::list, auth,
            "The course's datasets and data quota (staff, admin)",
            () -> 200 (p::course_data::DataUsage);
        POST "/courses/{code}/data" => course_data::push, auth,
            "Push a dataset (?name=NAME[&sha256=HEX]; the body a tar stream): stored once, \
             mounted at /data/NAME in the course's containers (staff, admin)",
            () -> 201 (p::course_data::DatasetPushed);
        DELETE "/courses/{code}/data/{name}" => course_data::remove, auth,
            "Remove a dataset from the course and its containers (staff, admin)",
            () -> 200 (p::course_data::DatasetRemoved);
        PUT "/courses/{code}/data-quota" => course_data::set_quota, auth,
            "Set the course's data quota in MiB; null for the default (admin)",
            (p::course_data::DataQuota) -> 200 (p::course_data::DataUsage);
        POST "/courses/{code}/archive" => course_archives::archive, auth,
            "Export every student's home into the archive store as a .tar.gz, kept `days` \
             (default the course's archive_days) (staff, admin)",
            (p::course_archives::ArchiveCourse) -> 202 (p::operations::Operation);
        PUT "/courses/{code}/archive-days" => course_archives::set_days, auth,
            "Set the days (1 to 3650) the course's archives made from now on are kept, audited \
             (its instructor, staff, admin)",
            (p::courses::CourseArchiveDays) -> 200 (p::courses::Course);
        GET "/courses/{code}/archive" => course_archives::list, auth,
            "The course's archived homes (staff, admin)",
            () -> 200 (Vec<p::course_archives::CourseArchive>);
        GET "/courses/{code}/archive.tar" => course_archives::class, auth,
            "Every archived home of the course as one tar of .tar.gz files (staff, admin)",
            () -> 200 ();
        GET "/courses/{code}/archive/{username}" => course_archives::download, auth,
            "A student's archived home (.tar.gz; its SHA-256 in X-Cohort-Sha256): the student's \
             own, or any of the course's for its staff and admins",
            () -> 200 ();
        GET "/data/{sha256}/tarball" => course_data::tarball, auth,
            "A dataset version's tarball (node certificate or admin)",
            () -> 200 ();
        GET "/lxd/trust" => lxd_trust::list, auth,
            "List trusted lxc certificates and pending tokens (own; admin all)",
            () -> 200 (Vec<p::lxd_trust::TrustEntry>);
        POST "/lxd/trust" => lxd_trust::create, auth,
            "Make a token `lxc remote add` accepts once (own; admin for anyone)",
            (p::lxd_trust::CreateTrustToken) -> 201 (p::lxd_trust::TrustTokenIssued);
        DELETE "/lxd/trust/{name}" => lxd_trust::remove, auth,
            "Untrust lxc certificates and tokens by name or fingerprint (own; admin any)",
            () -> 204 ();
        GET "/audit" => audit::list, auth,
            "The audit log, newest first (admin: all; instructor: their courses and their \
                     instances); query actor, action, object_kind, object, since, limit, before",
            () -> 200 (p::audit::AuditPage);
        GET "/usage" => usage::report, auth,
            "GPU time (allocated and busy GPU-seconds) summed by student, course, node or day \
                     (student: own; instructor: their courses; admin: all); query course, user, \
                     since, until, by",
            () -> 200 (p::usage::UsageReport);
        GET "/operations" => operations::list, auth,
            "The caller's operations (all for admins)",
            () -> 200 (Vec<p::operations::Operation>);
        GET "/operations/{id}" => operations::get, auth,
            "One operation",
            () -> 200 (p::operations::Operation);
        GET "/operations/{id}/wait" => operations::wait, auth,
            "Wait for an operation to end (query timeout)",
            () -> 200 (p::operations::Operation);
    }
}

#[cfg(test)]
mod tests {
    use actix_web::{test, web, App, HttpResponse};

    /// Every documented route answers at its own pattern, not at the unknown-route fallback nor
    /// at an earlier pattern that would take its path (`{action}` taking `password`).
    #[actix_web::test]
    async fn every_route_answers_at_its_pattern() {
        let app = test::init_service(
            App::new()
                .service(super::register(web::scope("/api/v1")))
                .default_service(web::to(HttpResponse::ImATeapot)),
        )
        .await;
        for route in super::routes() {
            let pattern = format!("/api/v1{}", route.path);
            // A number fits every placeholder, ids included.
            let uri: String = pattern
                .split('/')
                .map(|s| if s.starts_with('{') { "1" } else { s })
                .collect::<Vec<_>>()
                .join("/");
            let req = test::TestRequest::default()
                .method(route.method.clone())
                .uri(&uri)
                .to_request();
            let res = test::call_service(&app, req).await;
            assert_ne!(res.status(), 418, "{} {uri} is not routed", route.method);
            assert_eq!(
                res.request().match_pattern().as_deref(),
                Some(pattern.as_str()),
                "{} {uri} is taken by another route",
                route.method
            );
        }
    }
}
