//! `/api/v1/nodes`, `/api/v1/nodes/tokens`, `/api/v1/enroll` and `/api/v1/ca`.

use actix_web::{web, HttpResponse};
use cohort_proto::api::nodes::{CreateJoinToken, EvacuateNode};
use cohort_proto::enroll::EnrollRequest;

use super::extract::ApiJson;
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::nodes::enroll;
use crate::nodes::manage;

type Ctl = web::Data<Controller>;

pub async fn ca(ctl: Ctl) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body(ctl.pki.ca_pem().to_string())
}

pub async fn enroll(ctl: Ctl, req: ApiJson<EnrollRequest>) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(enroll::enroll(&ctl, req.0).await?))
}

pub async fn create_token(
    ctl: Ctl,
    caller: Caller,
    req: ApiJson<CreateJoinToken>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Created().json(enroll::create_join_token(&ctl, caller, req.0).await?))
}

pub async fn list(ctl: Ctl, bearer: Bearer) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(manage::list(&ctl, bearer).await?))
}

pub async fn get(
    ctl: Ctl,
    bearer: Bearer,
    name: web::Path<String>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(manage::get(&ctl, bearer, name.into_inner()).await?))
}

pub async fn cordon(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(manage::cordon(&ctl, caller, name.into_inner()).await?))
}

pub async fn evacuate(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    req: ApiJson<EvacuateNode>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Accepted()
        .json(manage::evacuate(&ctl, caller, name.into_inner(), req.0).await?))
}

pub async fn restore(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Accepted().json(manage::restore(&ctl, caller, name.into_inner()).await?))
}

pub async fn remove(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
) -> Result<HttpResponse, ActionError> {
    manage::remove(&ctl, caller, name.into_inner()).await?;
    Ok(HttpResponse::NoContent().finish())
}
