//! `/api/v1/jobs` and `/api/v1/courses/{code}/job-limits`: batch jobs (`crate::batch`).

use actix_web::{web, HttpResponse};
use cohort_proto::api::batch_jobs::{JobPriority, SubmitJob};
use cohort_proto::api::courses::CourseJobLimits;
use serde::Deserialize;

use super::extract::{ApiJson, ApiQuery};
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::batch::{self, ListFilter};
use crate::error::ActionError;

type Ctl = web::Data<Controller>;
type Reply = Result<HttpResponse, ActionError>;

pub async fn submit(ctl: Ctl, caller: Caller, req: ApiJson<SubmitJob>) -> Reply {
    Ok(HttpResponse::Created().json(batch::submit(&ctl, caller, req.0).await?))
}

pub async fn list(ctl: Ctl, bearer: Bearer, query: ApiQuery<ListFilter>) -> Reply {
    Ok(HttpResponse::Ok().json(batch::list(&ctl, bearer, query.0).await?))
}

pub async fn show(ctl: Ctl, caller: Caller, id: web::Path<i64>) -> Reply {
    Ok(HttpResponse::Ok().json(batch::show(&ctl, caller, id.into_inner()).await?))
}

pub async fn cancel(ctl: Ctl, caller: Caller, id: web::Path<i64>) -> Reply {
    Ok(HttpResponse::Ok().json(batch::cancel(&ctl, caller, id.into_inner()).await?))
}

pub async fn set_priority(
    ctl: Ctl,
    caller: Caller,
    id: web::Path<i64>,
    req: ApiJson<JobPriority>,
) -> Reply {
    let job = batch::set_priority(&ctl, caller, id.into_inner(), req.0).await?;
    Ok(HttpResponse::Ok().json(job))
}

/// `?offset=N`: where the read starts (default 0).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    #[serde(default)]
    pub offset: u64,
}

pub async fn log(ctl: Ctl, caller: Caller, id: web::Path<i64>, query: ApiQuery<LogQuery>) -> Reply {
    let log = batch::log(&ctl, caller, id.into_inner(), query.0.offset).await?;
    Ok(HttpResponse::Ok().json(log))
}

pub async fn set_limits(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<CourseJobLimits>,
) -> Reply {
    let limits = batch::set_limits(&ctl, caller, code.into_inner(), req.0).await?;
    Ok(HttpResponse::Ok().json(limits))
}
