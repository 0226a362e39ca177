//! `/api/v1/gpus`.

use actix_web::{web, HttpResponse};
use cohort_proto::api::gpus::UpdateGpu;

use super::extract::ApiJson;
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::nodes::gpus;

type Ctl = web::Data<Controller>;

pub async fn list(ctl: Ctl, bearer: Bearer) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(gpus::list(&ctl, bearer).await?))
}

pub async fn update(
    ctl: Ctl,
    caller: Caller,
    uuid: web::Path<String>,
    req: ApiJson<UpdateGpu>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(gpus::update(&ctl, caller, uuid.into_inner(), req.0).await?))
}
