//! `/api/v1/usage`: GPU time (see `crate::usage`).

use actix_web::{web, HttpResponse};
use cohort_proto::api::usage::UsageQuery;

use super::extract::ApiQuery;
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::error::ActionError;

pub async fn report(
    ctl: web::Data<Controller>,
    caller: Caller,
    query: ApiQuery<UsageQuery>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(crate::usage::report(&ctl, caller, query.0).await?))
}
