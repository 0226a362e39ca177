//! `/api/v1/orphans` (admin): containers Cohort has no record of.

use actix_web::{web, HttpResponse};
use cohort_proto::api::orphans::AdoptOrphan;

use super::extract::ApiJson;
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::instances::orphans;

type Ctl = web::Data<Controller>;
type Reply = Result<HttpResponse, ActionError>;

pub async fn list(ctl: Ctl, caller: Caller) -> Reply {
    Ok(HttpResponse::Ok().json(orphans::list(&ctl, caller).await?))
}

pub async fn delete(ctl: Ctl, caller: Caller, path: web::Path<(String, String)>) -> Reply {
    let (node, name) = path.into_inner();
    orphans::delete(&ctl, caller, node, name).await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn adopt(
    ctl: Ctl,
    caller: Caller,
    path: web::Path<(String, String)>,
    req: ApiJson<AdoptOrphan>,
) -> Reply {
    let (node, name) = path.into_inner();
    orphans::adopt(&ctl, caller, node, name, req.0).await?;
    Ok(HttpResponse::NoContent().finish())
}
