//! Projects (Cohort's courses, plus `default` for instances of no course) and cluster members
//! (Cohort's nodes), each through the action the REST API lists them with.

use actix_web::{web, HttpRequest};
use cohort_proto::api::nodes::{Node, NodeState};
use serde_json::{json, Value};

use super::instances::{project_of, visible, Listing};
use super::reply::{sync, LxdReply};
use super::{Ctl, LxdClient};
use crate::courses::course;
use crate::error::ActionError;
use crate::nodes::manage;

fn lxd_project(name: &str, description: &str, used_by: Vec<String>) -> Value {
    json!({
        "name": name,
        "description": description,
        // Images, profiles, volumes and networks are the fleet's, not a course's.
        "config": {
            "features.images": "false",
            "features.profiles": "false",
            "features.storage.volumes": "false",
            "features.networks": "false",
        },
        "used_by": used_by,
    })
}

/// Every project the caller sees, with the instances it sees in each.
async fn projects_of(ctl: &Ctl, client: LxdClient) -> Result<Vec<Value>, super::LxdError> {
    let courses = course::list(ctl, client.0.clone()).await?;
    let instances = visible(ctl, client.0).await?;
    let used = |name: &str| -> Vec<String> {
        instances
            .iter()
            .filter(|i| project_of(i) == name)
            .map(|i| format!("/1.0/instances/{}?project={name}", i.name))
            .collect()
    };
    let mut all = vec![lxd_project(
        "default",
        "Instances of no course",
        used("default"),
    )];
    for course in courses {
        all.push(lxd_project(&course.code, &course.title, used(&course.code)));
    }
    Ok(all)
}

pub async fn projects(ctl: Ctl, client: LxdClient, req: HttpRequest) -> LxdReply {
    let all = projects_of(&ctl, client).await?;
    Ok(if Listing::of(&req).recursion >= 1 {
        sync(all)
    } else {
        sync(
            all.iter()
                .map(|p| format!("/1.0/projects/{}", p["name"].as_str().unwrap_or_default()))
                .collect::<Vec<_>>(),
        )
    })
}

pub async fn project(ctl: Ctl, client: LxdClient, name: web::Path<String>) -> LxdReply {
    let name = name.into_inner();
    projects_of(&ctl, client)
        .await?
        .into_iter()
        .find(|p| p["name"] == name.as_str())
        .map(sync)
        .ok_or_else(|| ActionError::NotFound("Project".into()).into())
}

pub async fn cluster() -> LxdReply {
    Ok(sync(
        json!({"server_name": "cohort", "enabled": true, "member_config": []}),
    ))
}

fn member(node: &Node) -> Value {
    let (status, message) = match node.state {
        NodeState::Online => ("Online", "Fully operational"),
        NodeState::Offline => ("Offline", "No heartbeat"),
        NodeState::Cordoned => ("Online", "Cordoned: takes no new instances"),
        NodeState::Evacuating => ("Evacuated", "Evacuating"),
    };
    json!({
        "server_name": node.name,
        "url": node.agent_url,
        "database": false,
        "status": status,
        "message": message,
        "architecture": "x86_64",
        "failure_domain": "default",
        "description": "",
        "config": {},
        "roles": [],
        "groups": ["default"],
    })
}

pub async fn members(ctl: Ctl, client: LxdClient, req: HttpRequest) -> LxdReply {
    let all = manage::list(&ctl, client.0).await?;
    Ok(if Listing::of(&req).recursion >= 1 {
        sync(all.iter().map(member).collect::<Vec<_>>())
    } else {
        sync(
            all.iter()
                .map(|n| format!("/1.0/cluster/members/{}", n.name))
                .collect::<Vec<_>>(),
        )
    })
}

pub async fn member_get(ctl: Ctl, client: LxdClient, name: web::Path<String>) -> LxdReply {
    let name = name.into_inner();
    manage::list(&ctl, client.0)
        .await?
        .iter()
        .find(|n| n.name == name)
        .map(|n| sync(member(n)))
        .ok_or_else(|| ActionError::NotFound("Cluster member".into()).into())
}
