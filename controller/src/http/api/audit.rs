//! `/api/v1/audit`.

use actix_web::{web, HttpResponse};
use cohort_proto::api::audit::AuditQuery;

use super::extract::ApiQuery;
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::audit;
use crate::error::ActionError;

pub async fn list(
    ctl: web::Data<Controller>,
    caller: Caller,
    query: ApiQuery<AuditQuery>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(audit::list(&ctl, caller, query.0).await?))
}
