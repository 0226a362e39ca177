//! `/api/v1/lxd/trust`: tokens that let the real `lxc` client in, and the certificates trusted.

use actix_web::{web, HttpResponse};
use cohort_proto::api::lxd_trust::CreateTrustToken;

use super::extract::ApiJson;
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::nodes::lxd_trust;

type Ctl = web::Data<Controller>;

pub async fn create(
    ctl: Ctl,
    caller: Caller,
    req: ApiJson<CreateTrustToken>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Created().json(lxd_trust::create_token(&ctl, caller, req.0).await?))
}

pub async fn list(ctl: Ctl, caller: Caller) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(lxd_trust::list(&ctl, caller).await?))
}

pub async fn remove(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
) -> Result<HttpResponse, ActionError> {
    lxd_trust::remove(&ctl, caller, name.into_inner()).await?;
    Ok(HttpResponse::NoContent().finish())
}
