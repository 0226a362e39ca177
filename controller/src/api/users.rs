//! `/api/v1/me`, `/api/v1/me/ssh-keys`, `/api/v1/users`.

use actix_web::{web, HttpResponse};
use cohort_proto::api::users::{AddSshKey, CreateApiToken, CreateUser};

use super::extract::ApiJson;
use crate::actions::users;
use crate::auth::{Bearer, Caller};
use crate::controller::Controller;
use crate::error::ActionError;

type Ctl = web::Data<Controller>;

pub async fn me(ctl: Ctl, bearer: Bearer) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok().json(users::me(&ctl, bearer).await?))
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
        .json(users::issue_token(&ctl, caller, username.into_inner(), req.0).await?))
}
