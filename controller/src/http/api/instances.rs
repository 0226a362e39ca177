//! `/api/v1/instances` and the routes under an instance.

use actix_web::http::header::ContentType;
use actix_web::{web, HttpRequest, HttpResponse};
use cohort_proto::api::instances::{
    CreateInstance, CreateSnapshot, DeleteInstanceQuery, ExecRequest, FileQuery, InstancePage,
    InstanceStateChange, MoveInstance, UpdateInstance,
};

use super::extract::{ApiJson, ApiQuery, FileBody};
use crate::accounts::auth::{Bearer, Caller};
use crate::agent_client::FileMeta;
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::instances::io;
use crate::instances::manage;
use crate::instances::moves;

type Ctl = web::Data<Controller>;
type Reply = Result<HttpResponse, ActionError>;

pub async fn create(ctl: Ctl, caller: Caller, req: ApiJson<CreateInstance>) -> Reply {
    Ok(HttpResponse::Accepted().json(manage::create(&ctl, caller, req.0).await?))
}

pub async fn list(ctl: Ctl, bearer: Bearer, query: ApiQuery<InstancePage>) -> Reply {
    let page = query.0;
    let limit = page.limit;
    let page = manage::list(&ctl, bearer, page).await?;
    let mut reply = HttpResponse::Ok();
    if let Some(last) = page.next {
        let query = serde_urlencoded::to_string([
            ("limit", limit.unwrap_or(manage::MAX_PAGE).to_string()),
            ("after", last),
        ])
        .unwrap_or_default();
        reply.insert_header(("Link", format!("</api/v1/instances?{query}>; rel=\"next\"")));
    }
    Ok(reply.content_type(ContentType::json()).body(page.json))
}

pub async fn get(ctl: Ctl, bearer: Bearer, name: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok().json(manage::get(&ctl, bearer, name.into_inner()).await?))
}

pub async fn update(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    req: ApiJson<UpdateInstance>,
) -> Reply {
    Ok(HttpResponse::Ok().json(manage::update(&ctl, caller, name.into_inner(), req.0).await?))
}

pub async fn live_config(ctl: Ctl, caller: Caller, name: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok().json(manage::live_config(&ctl, caller, name.into_inner()).await?))
}

pub async fn change_state(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    req: ApiJson<InstanceStateChange>,
) -> Reply {
    Ok(HttpResponse::Accepted()
        .json(manage::change_state(&ctl, caller, name.into_inner(), req.0).await?))
}

/// **Attach a GPU again** after the reclaimer took them.
pub async fn attach_gpus_again(ctl: Ctl, caller: Caller, name: web::Path<String>) -> Reply {
    Ok(HttpResponse::Accepted()
        .json(crate::reclaim::reattach::attach_again(&ctl, caller, name.into_inner()).await?))
}

pub async fn move_instance(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    req: ApiJson<MoveInstance>,
) -> Reply {
    Ok(HttpResponse::Accepted()
        .json(moves::move_instance(&ctl, caller, name.into_inner(), req.0).await?))
}

pub async fn delete(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    query: ApiQuery<DeleteInstanceQuery>,
) -> Reply {
    Ok(HttpResponse::Accepted()
        .json(manage::delete(&ctl, caller, name.into_inner(), query.0.force).await?))
}

pub async fn exec(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    req: ApiJson<ExecRequest>,
) -> Reply {
    let result = io::exec(&ctl, caller, name.into_inner(), req.0).await?;
    Ok(HttpResponse::Ok()
        .content_type(ContentType::json())
        .streaming(result))
}

const FILE_HEADERS: [&str; 3] = ["X-Cohort-Mode", "X-Cohort-Uid", "X-Cohort-Gid"];

pub async fn get_file(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    query: ApiQuery<FileQuery>,
) -> Reply {
    let file = io::get_file(&ctl, caller, name.into_inner(), query.0.path).await?;
    let mut reply = HttpResponse::Ok();
    reply.content_type("application/octet-stream");
    let meta = file.meta;
    for (header, value) in FILE_HEADERS.iter().zip([meta.mode, meta.uid, meta.gid]) {
        if let Some(value) = value {
            reply.insert_header((*header, value));
        }
    }
    if let Some(length) = file.length {
        reply.no_chunking(length);
    }
    Ok(reply.streaming(file.body))
}

pub async fn put_file(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    query: ApiQuery<FileQuery>,
    req: HttpRequest,
    body: FileBody,
) -> Reply {
    let header = |h: &str| {
        req.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    let meta = FileMeta {
        mode: header(FILE_HEADERS[0]),
        uid: header(FILE_HEADERS[1]),
        gid: header(FILE_HEADERS[2]),
    };
    io::put_file(
        &ctl,
        caller,
        name.into_inner(),
        query.0.path,
        body.0.to_vec(),
        meta,
    )
    .await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn snapshots(ctl: Ctl, caller: Caller, name: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok().json(io::snapshots(&ctl, caller, name.into_inner()).await?))
}

pub async fn create_snapshot(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    req: ApiJson<CreateSnapshot>,
) -> Reply {
    Ok(HttpResponse::Created()
        .json(io::create_snapshot(&ctl, caller, name.into_inner(), req.0).await?))
}

pub async fn restore_snapshot(
    ctl: Ctl,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Reply {
    let (name, snapshot) = path.into_inner();
    io::restore_snapshot(&ctl, caller, name, snapshot).await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn delete_snapshot(ctl: Ctl, caller: Caller, path: web::Path<(String, String)>) -> Reply {
    let (name, snapshot) = path.into_inner();
    io::delete_snapshot(&ctl, caller, name, snapshot).await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn home_snapshots(ctl: Ctl, caller: Caller, name: web::Path<String>) -> Reply {
    let list = crate::instances::home::snapshots(&ctl, caller, name.into_inner()).await?;
    Ok(HttpResponse::Ok().json(list))
}

pub async fn restore_home(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    req: ApiJson<cohort_proto::api::instances::RestoreHomeRequest>,
) -> Reply {
    let op = crate::instances::home::restore(&ctl, caller, name.into_inner(), req.0).await?;
    Ok(HttpResponse::Accepted().json(op))
}

pub async fn reclaim_warnings(ctl: Ctl, bearer: Bearer, name: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok()
        .json(crate::reclaim::warning::pending(&ctl, bearer, name.into_inner()).await?))
}

pub async fn keep_working(ctl: Ctl, caller: Caller, name: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok()
        .json(crate::reclaim::warning::keep_working(&ctl, caller, name.into_inner()).await?))
}
