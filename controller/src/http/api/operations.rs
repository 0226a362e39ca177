//! `/api/v1/operations`.

use actix_web::{web, HttpResponse};
use cohort_proto::api::operations::WaitQuery;
use uuid::Uuid;

use super::extract::ApiQuery;
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::jobs::operations;

type Ctl = web::Data<Controller>;

fn operation_id(raw: &str) -> Result<Uuid, ActionError> {
    raw.parse()
        .map_err(|_| ActionError::invalid("id", format!("{raw:?} is not an operation id")))
}

pub async fn list(ctl: Ctl, bearer: Bearer) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(operations::list(&ctl, bearer).await?))
}

pub async fn get(
    ctl: Ctl,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(operations::get(&ctl, caller, operation_id(&id)?).await?))
}

pub async fn wait(
    ctl: Ctl,
    caller: Caller,
    id: web::Path<String>,
    query: ApiQuery<WaitQuery>,
) -> Result<HttpResponse, ActionError> {
    let op = operations::wait(&ctl, caller, operation_id(&id)?, query.0.timeout).await?;
    Ok(HttpResponse::Ok().json(op))
}
