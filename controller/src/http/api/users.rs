//! `/api/v1/me`, `/api/v1/me/ssh-keys`, `/api/v1/users` with their tokens, disabling and
//! deleting, and an account's role.

use actix_web::{web, HttpResponse};
use cohort_proto::api::users::{AddSshKey, CreateApiToken, CreateUser, SetRole};
use serde::Deserialize;

use super::extract::{ApiJson, ApiQuery};
use crate::accounts::auth::{Bearer, Caller};
use crate::accounts::disable;
use crate::accounts::roles;
use crate::accounts::tokens;
use crate::accounts::users;
use crate::app::state::Controller;
use crate::error::ActionError;

type Ctl = web::Data<Controller>;

pub async fn me(ctl: Ctl, bearer: Bearer) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(users::me(&ctl, bearer).await?))
}

/// The caller's GPU budgets this period, one per budgeted course they are enrolled in.
pub async fn my_gpu_budgets(ctl: Ctl, bearer: Bearer) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(crate::courses::budget::mine(&ctl, bearer).await?))
}

pub async fn add_ssh_key(
    ctl: Ctl,
    caller: Caller,
    req: ApiJson<AddSshKey>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Created().json(users::add_ssh_key(&ctl, caller, req.0).await?))
}

pub async fn delete_ssh_key(
    ctl: Ctl,
    caller: Caller,
    id: web::Path<i64>,
) -> Result<HttpResponse, ActionError> {
    users::delete_ssh_key(&ctl, caller, id.into_inner()).await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn list(ctl: Ctl, bearer: Bearer) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(users::list(&ctl, bearer).await?))
}

pub async fn create(
    ctl: Ctl,
    caller: Caller,
    req: ApiJson<CreateUser>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Created().json(users::create(&ctl, caller, req.0).await?))
}

pub async fn issue_token(
    ctl: Ctl,
    caller: Caller,
    username: web::Path<String>,
    req: ApiJson<CreateApiToken>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Created()
        .json(tokens::issue(&ctl, caller, username.into_inner(), req.0).await?))
}

pub async fn list_tokens(
    ctl: Ctl,
    caller: Caller,
    username: web::Path<String>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(tokens::list(&ctl, caller, username.into_inner()).await?))
}

pub async fn revoke_token(
    ctl: Ctl,
    caller: Caller,
    path: web::Path<(String, i64)>,
) -> Result<HttpResponse, ActionError> {
    let (username, id) = path.into_inner();
    tokens::revoke(&ctl, caller, username, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn disable(
    ctl: Ctl,
    caller: Caller,
    username: web::Path<String>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok()
        .json(disable::set_disabled(&ctl, caller, username.into_inner(), true).await?))
}

pub async fn enable(
    ctl: Ctl,
    caller: Caller,
    username: web::Path<String>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok()
        .json(disable::set_disabled(&ctl, caller, username.into_inner(), false).await?))
}

pub async fn set_role(
    ctl: Ctl,
    caller: Caller,
    username: web::Path<String>,
    req: ApiJson<SetRole>,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(roles::set_role(&ctl, caller, username.into_inner(), req.0).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    instances: Option<String>,
}

pub async fn delete(
    ctl: Ctl,
    caller: Caller,
    username: web::Path<String>,
    query: ApiQuery<DeleteQuery>,
) -> Result<HttpResponse, ActionError> {
    let on_instances = disable::on_instances(query.0.instances.as_deref())?;
    let deleted = disable::delete(&ctl, caller, username.into_inner(), on_instances).await?;
    Ok(HttpResponse::Ok().json(deleted))
}
