//! `GET /1.0/instances` and `/1.0/instances/{name}`: Cohort's instances as LXD instances, in
//! LXD projects named after their courses (`default` for those of no course).

use std::collections::{BTreeMap, BTreeSet};

use actix_web::HttpRequest;
use cohort_proto::api::instances::{Instance, InstancePage, ObservedState};
use serde_json::{json, Value};

use super::reply::{sync, LxdError, LxdReply};
use super::{caller_of, Ctl, LxdClient};
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::instances::{lxd_live, manage};

/// Pages read at most for one listing: 100 pages of 1000 instances.
const MAX_PAGES: usize = 100;

/// The project an instance is in: its course, or `default`.
pub fn project_of(instance: &Instance) -> &str {
    instance.course.as_deref().unwrap_or("default")
}

/// Every instance the caller may see, through the same action as `GET /api/v1/instances`.
pub async fn visible(ctl: &Controller, bearer: Bearer) -> Result<Vec<Instance>, LxdError> {
    let mut all = Vec::new();
    let mut after = None;
    for _ in 0..MAX_PAGES {
        let page = manage::list(
            ctl,
            bearer.clone(),
            InstancePage {
                limit: None,
                after: after.take(),
            },
        )
        .await?;
        let items: Vec<Instance> = serde_json::from_slice(&page.json)
            .map_err(|e| crate::error::ActionError::Internal(e.to_string()))?;
        all.extend(items);
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    Ok(all)
}

/// LXD's status and status code for an observed state. A node that does not answer makes its
/// instances `Error`, as LXD shows instances of an offline cluster member.
fn status(state: &ObservedState) -> (&'static str, u16) {
    match state {
        ObservedState::Running => ("Running", 103),
        ObservedState::Stopped => ("Stopped", 102),
        ObservedState::Queued | ObservedState::Pending => ("Pending", 105),
        ObservedState::Unknown | ObservedState::Missing | ObservedState::Error => ("Error", 112),
    }
}

/// Keys Cohort shows in an instance's config that come from elsewhere (its image, its owner and
/// the limits it keeps apart, under the keys LXD shows them as and `lxc launch -c` sets), so a
/// client cannot change them here.
pub const SHOWN_ONLY: [&str; 4] = [
    "image.description",
    "user.cohort.owner",
    "limits.cpu",
    "limits.memory",
];

/// The config an instance shows: its keys and the [`SHOWN_ONLY`] ones.
pub fn shown_config(i: &Instance) -> BTreeMap<String, String> {
    let mut config = i.config.clone();
    config.insert(SHOWN_ONLY[0].into(), i.image.clone());
    config.insert(SHOWN_ONLY[1].into(), i.owner.clone());
    config.insert(SHOWN_ONLY[2].into(), i.limits.cpu.to_string());
    config.insert(SHOWN_ONLY[3].into(), format!("{}MiB", i.limits.memory_mib));
    config
}

/// `api.Instance` (recursion=1) or `api.InstanceFull` (recursion=2: with `state`).
pub fn lxd_instance(i: &Instance, full: bool) -> Value {
    let (status, code) = status(&i.observed_state);
    let config = shown_config(i);
    let mut value = json!({
        "name": i.name,
        "architecture": "x86_64",
        "config": config,
        "expanded_config": config,
        "devices": {},
        "expanded_devices": {},
        "ephemeral": false,
        "stateful": false,
        "profiles": [],
        "description": i.description.clone().unwrap_or_default(),
        "created_at": i.created_at,
        "last_used_at": i.last_seen_at.unwrap_or(i.created_at),
        "status": status,
        "status_code": code,
        "location": i.node.clone().unwrap_or_default(),
        "type": "container",
        "project": project_of(i),
    });
    if full {
        value["state"] = lxd_state(i, None);
        value["snapshots"] = json!([]);
        value["backups"] = json!([]);
    }
    value
}

/// `api.InstanceState`: LXD's own, as the instance's node reads it now (`live`), or else as far
/// as the controller knows it: status only, usage figures zero (which `lxc` shows as absent)
/// rather than guessed.
pub fn lxd_state(i: &Instance, live: Option<&Value>) -> Value {
    let (status, code) = status(&i.observed_state);
    let mut state = json!({
        "status": status,
        "status_code": code,
        "disk": {},
        "memory": {"usage": 0, "usage_peak": 0, "swap_usage": 0, "swap_usage_peak": 0},
        "network": {},
        "pid": 0,
        "processes": 0,
        "cpu": {"usage": 0},
    });
    if let (Some(Value::Object(live)), Some(shown)) = (live, state.as_object_mut()) {
        for (key, value) in live {
            // LXD answers `null` for what a stopped container does not have.
            if !value.is_null() {
                shown.insert(key.clone(), value.clone());
            }
        }
    }
    state
}

/// An instance with its live state, when its node gave one: the instance's status follows the
/// state's (LXD's own word, newer than what Cohort recorded).
fn with_live_state(i: &Instance, live: Option<&Value>) -> Value {
    let mut value = lxd_instance(i, true);
    let state = lxd_state(i, live);
    if live.is_some() {
        value["status"] = state["status"].clone();
        value["status_code"] = state["status_code"].clone();
    }
    value["state"] = state;
    value
}

/// LXD's live state of one instance, or `None` (queued, or its node did not answer: the
/// recorded state is shown then).
async fn live_state_of(ctl: &Controller, caller: Caller, i: &Instance) -> Option<Value> {
    i.node.as_ref()?;
    match lxd_live::state(ctl, caller, i.name.clone()).await {
        Ok(state) => Some(state),
        Err(e) => {
            tracing::info!(instance = %i.name, error = %e, "no live state for an LXD-style read");
            None
        }
    }
}

/// The query of a listing: `recursion`, `project`, `all-projects`.
pub struct Listing {
    pub recursion: u8,
    pub project: String,
    pub all_projects: bool,
    /// A server-side `filter` was asked for: Cohort refuses it rather than ignore it.
    pub filtered: bool,
}

impl Listing {
    pub fn of(req: &HttpRequest) -> Listing {
        let mut listing = Listing {
            recursion: 0,
            project: "default".into(),
            all_projects: false,
            filtered: false,
        };
        for (key, value) in url::form_urlencoded::parse(req.query_string().as_bytes()) {
            match &*key {
                "recursion" => listing.recursion = value.parse().unwrap_or(0),
                "project" if !value.is_empty() => listing.project = value.into_owned(),
                "all-projects" => listing.all_projects = value == "true",
                "filter" if !value.trim().is_empty() => listing.filtered = true,
                _ => {}
            }
        }
        listing
    }
}

pub async fn list(ctl: Ctl, client: LxdClient, req: HttpRequest) -> LxdReply {
    let listing = Listing::of(&req);
    if listing.filtered {
        return Err(LxdError::not_supported("server-side filters on instances"));
    }
    let all = visible(&ctl, client.0).await?;
    let chosen = all
        .iter()
        .filter(|i| listing.all_projects || project_of(i) == listing.project);
    Ok(match listing.recursion {
        0 => sync(
            chosen
                .map(|i| match project_of(i) {
                    "default" => format!("/1.0/instances/{}", i.name),
                    project => format!("/1.0/instances/{}?project={project}", i.name),
                })
                .collect::<Vec<_>>(),
        ),
        1 => sync(chosen.map(|i| lxd_instance(i, false)).collect::<Vec<_>>()),
        _ => {
            // `lxc list`'s default columns (addresses) ask for states: each node's, at once.
            let chosen: Vec<&Instance> = chosen.collect();
            let nodes: BTreeSet<String> = chosen.iter().filter_map(|i| i.node.clone()).collect();
            let live = lxd_live::states_on(&ctl, nodes.into_iter().collect()).await?;
            sync(
                chosen
                    .into_iter()
                    .map(|i| {
                        let key = i.node.clone().map(|n| (n, i.name.clone()));
                        with_live_state(i, key.and_then(|k| live.get(&k)))
                    })
                    .collect::<Vec<_>>(),
            )
        }
    })
}

pub async fn get(
    ctl: Ctl,
    client: LxdClient,
    name: actix_web::web::Path<String>,
    req: HttpRequest,
) -> LxdReply {
    let recursion = Listing::of(&req).recursion;
    let caller = caller_of(&ctl, LxdClient(client.0.clone())).await?;
    let instance = in_project(&ctl, client, name.into_inner(), &req).await?;
    // `lxc info` reads the full instance: its state as its node's LXD gives it now.
    let mut shown = if recursion >= 1 {
        let live = live_state_of(&ctl, caller.clone(), &instance).await;
        with_live_state(&instance, live.as_ref())
    } else {
        lxd_instance(&instance, false)
    };
    // One instance shows the devices its node's LXD holds (`lxc config device list|show`, and
    // what a `PUT` of it removes); a listing shows none, asking no node.
    if instance.node.is_some() {
        let live = manage::live_config(&ctl, caller, instance.name.clone()).await?;
        shown["devices"] = json!(live.devices);
        shown["expanded_devices"] = json!(live.devices);
    }
    Ok(sync(shown))
}

/// The instance the caller names in the project it is in, or LXD's 404.
pub(super) async fn in_project(
    ctl: &Controller,
    client: LxdClient,
    name: String,
    req: &HttpRequest,
) -> Result<Instance, LxdError> {
    let listing = Listing::of(req);
    let instance = manage::get(ctl, client.0, name).await?;
    if project_of(&instance) != listing.project {
        return Err(crate::error::ActionError::NotFound("Instance".into()).into());
    }
    Ok(instance)
}

pub async fn state(
    ctl: Ctl,
    client: LxdClient,
    name: actix_web::web::Path<String>,
    req: HttpRequest,
) -> LxdReply {
    let caller = caller_of(&ctl, LxdClient(client.0.clone())).await?;
    let instance = in_project(&ctl, client, name.into_inner(), &req).await?;
    let live = live_state_of(&ctl, caller, &instance).await;
    Ok(sync(lxd_state(&instance, live.as_ref())))
}
