//! `/api/v1/instances/{name}/gpu-lease`, `/api/v1/gpu-leases` and
//! `/api/v1/courses/{code}/gpu-mode`: GPUs on demand (`crate::reclaim::leases`).

use actix_web::{web, HttpResponse};
use cohort_proto::api::courses::CourseGpuMode;
use cohort_proto::api::gpu_leases::GpuLeaseRequest;

use super::extract::ApiJson;
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::reclaim::leases;

type Ctl = web::Data<Controller>;
type Reply = Result<HttpResponse, ActionError>;

pub async fn request(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    req: ApiJson<GpuLeaseRequest>,
) -> Reply {
    Ok(HttpResponse::Ok().json(leases::request(&ctl, caller, name.into_inner(), req.0).await?))
}

pub async fn release(ctl: Ctl, caller: Caller, name: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok().json(leases::release(&ctl, caller, name.into_inner()).await?))
}

pub async fn show(ctl: Ctl, caller: Caller, name: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok().json(leases::show(&ctl, caller, name.into_inner()).await?))
}

pub async fn list(ctl: Ctl, bearer: Bearer) -> Reply {
    Ok(HttpResponse::Ok().json(leases::list(&ctl, bearer).await?))
}

pub async fn set_mode(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<CourseGpuMode>,
) -> Reply {
    Ok(HttpResponse::Ok().json(leases::set_mode(&ctl, caller, code.into_inner(), req.0).await?))
}
