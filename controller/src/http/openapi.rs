//! The OpenAPI 3 document served at `/api/v1/openapi.json`, built from the same schemars types
//! the handlers take and answer, so it cannot drift from them.

use cohort_proto::api::{
    courses, gpus, images, instances, lxd_trust, nodes, operations, orphans, users,
};
use cohort_proto::enroll::{EnrollRequest, EnrollResponse};
use cohort_proto::ErrorBody;
use schemars::gen::{SchemaGenerator, SchemaSettings};
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

/// One documented route.
struct Route {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    request: Option<Value>,
    /// (status, schema); `None` schema = no JSON body.
    response: (u16, Option<Value>),
    authenticated: bool,
}

fn schema<T: JsonSchema>(gen: &mut SchemaGenerator) -> Option<Value> {
    serde_json::to_value(gen.subschema_for::<T>()).ok()
}

fn list<T: JsonSchema>(gen: &mut SchemaGenerator) -> Option<Value> {
    schema::<Vec<T>>(gen)
}

fn routes(g: &mut SchemaGenerator) -> Vec<Route> {
    use instances as i;
    let r = |method, path, summary, request, response, authenticated| Route {
        method,
        path,
        summary,
        request,
        response,
        authenticated,
    };
    let op = schema::<operations::Operation>(g);
    vec![
        r(
            "get",
            "/api/v1/ca",
            "The Cohort CA certificate (PEM)",
            None,
            (200, None),
            false,
        ),
        r(
            "post",
            "/api/v1/enroll",
            "Enroll a node with a join token",
            schema::<EnrollRequest>(g),
            (200, schema::<EnrollResponse>(g)),
            false,
        ),
        r(
            "get",
            "/api/v1/me",
            "The caller, their instances and SSH keys",
            None,
            (200, schema::<users::Me>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/me/ssh-keys",
            "Add an SSH key",
            schema::<users::AddSshKey>(g),
            (201, schema::<users::SshKey>(g)),
            true,
        ),
        r(
            "delete",
            "/api/v1/me/ssh-keys/{id}",
            "Remove an SSH key",
            None,
            (204, None),
            true,
        ),
        r(
            "get",
            "/api/v1/users",
            "List users (instructor, admin)",
            None,
            (200, list::<users::User>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/users",
            "Create a user (admin)",
            schema::<users::CreateUser>(g),
            (201, schema::<users::User>(g)),
            true,
        ),
        r(
            "put",
            "/api/v1/users/{username}/role",
            "Change a user's role (admin; not one's own)",
            schema::<users::SetRole>(g),
            (200, schema::<users::User>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/users/{username}/tokens",
            "Issue an API token",
            schema::<users::CreateApiToken>(g),
            (201, schema::<users::ApiTokenIssued>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/users/{username}/tokens",
            "List a user's API tokens (the user, admin)",
            None,
            (200, list::<users::ApiToken>(g)),
            true,
        ),
        r(
            "delete",
            "/api/v1/users/{username}/tokens/{id}",
            "Revoke an API token (the user, admin)",
            None,
            (204, None),
            true,
        ),
        r(
            "post",
            "/api/v1/lxd/trust",
            "Make a token `lxc remote add` accepts once (own; admin for anyone)",
            schema::<lxd_trust::CreateTrustToken>(g),
            (201, schema::<lxd_trust::TrustTokenIssued>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/lxd/trust",
            "List trusted lxc certificates and pending tokens (own; admin all)",
            None,
            (200, list::<lxd_trust::TrustEntry>(g)),
            true,
        ),
        r(
            "delete",
            "/api/v1/lxd/trust/{name}",
            "Untrust lxc certificates and tokens by name or fingerprint (own; admin any)",
            None,
            (204, None),
            true,
        ),
        r(
            "post",
            "/api/v1/users/{username}/disable",
            "Disable a user: tokens refused, SSH logins removed (admin)",
            None,
            (200, schema::<users::User>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/users/{username}/enable",
            "Enable a disabled user (admin)",
            None,
            (200, schema::<users::User>(g)),
            true,
        ),
        r(
            "delete",
            "/api/v1/users/{username}",
            "Delete a user; ?instances=keep (default) or delete (admin)",
            None,
            (200, schema::<users::UserDeleted>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/nodes",
            "List nodes (instructor, admin)",
            None,
            (200, list::<nodes::Node>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/nodes/tokens",
            "Issue a join token (admin)",
            schema::<nodes::CreateJoinToken>(g),
            (201, schema::<nodes::JoinTokenIssued>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/nodes/{name}",
            "One node",
            None,
            (200, schema::<nodes::Node>(g)),
            true,
        ),
        r(
            "delete",
            "/api/v1/nodes/{name}",
            "Remove a node and revoke its certificate (admin)",
            None,
            (204, None),
            true,
        ),
        r(
            "post",
            "/api/v1/nodes/{name}/cordon",
            "Take a node out of placement (admin)",
            None,
            (200, schema::<nodes::Node>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/nodes/{name}/evacuate",
            "Stop a node's instances, or move them with their data (admin)",
            schema::<nodes::EvacuateNode>(g),
            (202, op.clone()),
            true,
        ),
        r(
            "post",
            "/api/v1/nodes/{name}/restore",
            "Put a node back into placement, moving back what it moved away (admin)",
            None,
            (202, op.clone()),
            true,
        ),
        r(
            "get",
            "/api/v1/gpus",
            "List GPUs (instructor, admin)",
            None,
            (200, list::<gpus::Gpu>(g)),
            true,
        ),
        r(
            "patch",
            "/api/v1/gpus/{uuid}",
            "Set a GPU's share limit (admin)",
            schema::<gpus::UpdateGpu>(g),
            (200, schema::<gpus::Gpu>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/images",
            "List images",
            None,
            (200, list::<images::Image>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/images",
            "Import an image tarball (admin; query alias, description, gpu_ready, jupyter)",
            None,
            (201, schema::<images::Image>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/images/publish",
            "Publish a stopped instance as an image (instructor, admin)",
            schema::<images::PublishImage>(g),
            (202, op.clone()),
            true,
        ),
        r(
            "get",
            "/api/v1/images/{name}",
            "One image by alias or fingerprint",
            None,
            (200, schema::<images::Image>(g)),
            true,
        ),
        r(
            "delete",
            "/api/v1/images/{name}",
            "Delete an unused image (admin)",
            None,
            (204, None),
            true,
        ),
        r(
            "get",
            "/api/v1/images/{name}/tarball",
            "The tarball (node certificate or admin)",
            None,
            (200, None),
            true,
        ),
        r(
            "patch",
            "/api/v1/images/{name}",
            "Give the image a new alias, e.g. promote an image an instructor published under \
             their own name into the shared names (admin)",
            schema::<images::ImagePatch>(g),
            (200, schema::<images::Image>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/images/{name}/distribute",
            "Have every online node lacking the image fetch it now (instructor, admin)",
            None,
            (202, schema::<images::ImageDistribution>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/instances",
            "One page of the instances the caller may see, by name; query limit (1-1000, \
             default 1000) and after (the last name of the previous page); a Link header \
             with rel=\"next\" names the next page",
            None,
            (200, list::<i::Instance>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/instances",
            "Create an instance (placed or queued)",
            schema::<i::CreateInstance>(g),
            (202, op.clone()),
            true,
        ),
        r(
            "get",
            "/api/v1/instances/{name}",
            "One instance",
            None,
            (200, schema::<i::Instance>(g)),
            true,
        ),
        r(
            "delete",
            "/api/v1/instances/{name}",
            "Delete an instance (query force)",
            None,
            (202, op.clone()),
            true,
        ),
        r(
            "patch",
            "/api/v1/instances/{name}",
            "Set or unset config keys; add or remove devices (admin)",
            schema::<i::UpdateInstance>(g),
            (200, schema::<i::LiveConfig>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/instances/{name}/config",
            "Config and devices as the node's LXD holds them",
            None,
            (200, schema::<i::LiveConfig>(g)),
            true,
        ),
        r(
            "put",
            "/api/v1/instances/{name}/state",
            "Start, stop or restart",
            schema::<i::InstanceStateChange>(g),
            (202, op.clone()),
            true,
        ),
        r(
            "post",
            "/api/v1/instances/{name}/move",
            "Move to another node with its root disk and home (admin)",
            schema::<i::MoveInstance>(g),
            (202, op.clone()),
            true,
        ),
        r(
            "post",
            "/api/v1/instances/{name}/exec",
            "Run a command to completion",
            schema::<i::ExecRequest>(g),
            (200, schema::<i::ExecResult>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/instances/{name}/files",
            "Read a file (query path)",
            None,
            (200, None),
            true,
        ),
        r(
            "put",
            "/api/v1/instances/{name}/files",
            "Write a file (query path; raw body)",
            None,
            (204, None),
            true,
        ),
        r(
            "get",
            "/api/v1/instances/{name}/snapshots",
            "List snapshots",
            None,
            (200, list::<i::Snapshot>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/instances/{name}/snapshots",
            "Take a snapshot",
            schema::<i::CreateSnapshot>(g),
            (201, schema::<i::Snapshot>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/instances/{name}/snapshots/{snapshot}/restore",
            "Restore a snapshot",
            None,
            (204, None),
            true,
        ),
        r(
            "delete",
            "/api/v1/instances/{name}/snapshots/{snapshot}",
            "Delete a snapshot",
            None,
            (204, None),
            true,
        ),
        r(
            "get",
            "/api/v1/courses",
            "Courses the caller teaches, takes or (admin) all",
            None,
            (200, list::<courses::Course>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/courses",
            "Create a course (instructor, admin)",
            schema::<courses::CreateCourse>(g),
            (201, schema::<courses::Course>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/courses/{code}",
            "One course",
            None,
            (200, schema::<courses::Course>(g)),
            true,
        ),
        r(
            "put",
            "/api/v1/courses/{code}/quota",
            "Set a course's quota (admin)",
            schema::<courses::CourseQuota>(g),
            (200, schema::<courses::Course>(g)),
            true,
        ),
        r(
            "put",
            "/api/v1/courses/{code}/home",
            "Set the size of a course's home volumes (home_mib; null: the default); applied to each home when its container is next made",
            schema::<courses::CourseHome>(g),
            (200, schema::<courses::Course>(g)),
            true,
        ),
        r(
            "put",
            "/api/v1/courses/{code}/limits",
            "Set each student's cpu, memory_mib and disk_gib (a field left out is kept); containers made from now on take them, those already made keep theirs and are listed in kept",
            schema::<courses::CourseLimits>(g),
            (200, schema::<courses::CourseLimitsChange>(g)),
            true,
        ),
        r(
            "put",
            "/api/v1/courses/{code}/jupyter",
            "Let a course's instructors open its students' JupyterLab through the portal (instructors: true), or only each student (false, the default)",
            schema::<courses::CourseJupyter>(g),
            (200, schema::<courses::Course>(g)),
            true,
        ),
        r(
            "put",
            "/api/v1/courses/{code}/network",
            "Set a course's network policy (egress, ssh_from); applied to its running containers at once",
            schema::<courses::NetworkPolicy>(g),
            (200, schema::<courses::Course>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/courses/{code}/roster",
            "Import a roster (raw CSV or JSON body)",
            None,
            (200, schema::<courses::RosterReport>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/courses/{code}/students",
            "The course's students and their containers",
            None,
            (200, list::<courses::Student>(g)),
            true,
        ),
        r(
            "delete",
            "/api/v1/courses/{code}/students/{username}",
            "Remove a student and delete their container",
            None,
            (202, op.clone()),
            true,
        ),
        r(
            "post",
            "/api/v1/courses/{code}/students/{username}/{action}",
            "reset, start, stop or restart a student's container",
            None,
            (202, op.clone()),
            true,
        ),
        r(
            "post",
            "/api/v1/courses/{code}/students/{username}/password",
            "Issue a roster-made student without own credentials a new password (shown once)",
            None,
            (201, schema::<courses::IssuedPassword>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/courses/{code}/students/{username}/snapshots",
            "Snapshots of a student's container",
            None,
            (200, list::<i::Snapshot>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/courses/{code}/students/{username}/snapshots",
            "Snapshot a student's container (name optional: default by the time)",
            schema::<courses::StudentSnapshot>(g),
            (201, schema::<i::Snapshot>(g)),
            true,
        ),
        r(
            "post",
            "/api/v1/courses/{code}/students/{username}/snapshots/{snapshot}/restore",
            "Restore a student's container to a snapshot",
            None,
            (204, None),
            true,
        ),
        r(
            "post",
            "/api/v1/courses/{code}/provision",
            "Make every student's container (idempotent)",
            None,
            (202, op.clone()),
            true,
        ),
        r(
            "get",
            "/api/v1/courses/{code}/endpoints",
            "SSH endpoints export (query format=csv|json|ssh-config|known-hosts)",
            None,
            (200, None),
            true,
        ),
        r(
            "get",
            "/api/v1/orphans",
            "Containers found on nodes without a record in Cohort (admin)",
            None,
            (200, list::<orphans::Orphan>(g)),
            true,
        ),
        r(
            "delete",
            "/api/v1/orphans/{node}/{name}",
            "Delete an orphan container from its node (admin)",
            None,
            (204, None),
            true,
        ),
        r(
            "post",
            "/api/v1/orphans/{node}/{name}/adopt",
            "Make an orphan container an instance of an owner (admin)",
            schema::<orphans::AdoptOrphan>(g),
            (204, None),
            true,
        ),
        r(
            "delete",
            "/api/v1/courses/{code}",
            "Remove a torn-down course (its instructor or an admin)",
            None,
            (204, None),
            true,
        ),
        r(
            "post",
            "/api/v1/courses/{code}/teardown",
            "Stop or delete every container of the course",
            schema::<courses::Teardown>(g),
            (202, op.clone()),
            true,
        ),
        r(
            "get",
            "/api/v1/operations",
            "The caller's operations (all for admins)",
            None,
            (200, list::<operations::Operation>(g)),
            true,
        ),
        r(
            "get",
            "/api/v1/operations/{id}",
            "One operation",
            None,
            (200, op.clone()),
            true,
        ),
        r(
            "get",
            "/api/v1/operations/{id}/wait",
            "Wait for an operation to end (query timeout)",
            None,
            (200, op),
            true,
        ),
        r(
            "get",
            "/api/v1/audit",
            "The audit log, newest first (admin: all; instructor: their courses and their \
             instances); query actor, action, object_kind, object, since, limit, before",
            None,
            (200, schema::<cohort_proto::api::audit::AuditPage>(g)),
            true,
        ),
    ]
}

fn parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
        .collect()
}

/// The whole document.
pub fn document() -> Value {
    let mut gen = SchemaSettings::openapi3().into_generator();
    let error = schema::<ErrorBody>(&mut gen);
    let mut paths = Map::new();
    for route in routes(&mut gen) {
        let mut responses = Map::new();
        let ok = match route.response.1 {
            Some(s) => {
                json!({"description": "success", "content": {"application/json": {"schema": s}}})
            }
            None => json!({"description": "success"}),
        };
        responses.insert(route.response.0.to_string(), ok);
        responses.insert(
            "4XX".into(),
            json!({"description": "the caller's error", "content": {"application/json": {"schema": error}}}),
        );
        let mut operation = json!({
            "summary": route.summary,
            "parameters": parameters(route.path),
            "responses": responses,
        });
        if let Some(body) = route.request {
            operation["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": body}}});
        }
        if !route.authenticated {
            operation["security"] = json!([]);
        }
        let entry = paths.entry(route.path).or_insert_with(|| json!({}));
        entry[route.method] = operation;
    }
    json!({
        "openapi": "3.0.3",
        "info": {"title": "Cohort controller API", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {
            "schemas": gen.take_definitions(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    })
}

#[cfg(test)]
mod tests {
    use super::document;

    /// Every `$ref` in the document names a schema it defines.
    #[test]
    fn every_reference_resolves() {
        let doc = document();
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = part.split('"').next().expect("name");
            assert!(schemas.contains_key(name), "unresolved reference to {name}");
        }
        assert!(doc["paths"]["/api/v1/instances"]["post"]["requestBody"].is_object());
        assert!(schemas.contains_key("CreateInstance"));
        assert!(schemas.contains_key("ErrorBody"));
    }
}
