//! Request extractors: the bearer-token [`Caller`], JSON and query bodies whose errors name the
//! field at fault, a bounded raw body, and the node certificate a TLS client presented.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
use serde::de::DeserializeOwned;

use super::body::{AuthOutcome, PendingBody};
use crate::accounts::auth::{Bearer, Caller};
use crate::accounts::users::authenticate;
use crate::app::state::Controller;
use crate::error::ActionError;

/// Largest JSON body accepted: 1 MiB.
pub const JSON_LIMIT: usize = 1 << 20;

/// The field a serde error names (`unknown field `x``, `missing field `x``), if any.
fn field_of(message: &str) -> String {
    message
        .split('`')
        .nth(1)
        .filter(|_| message.contains("field"))
        .unwrap_or("body")
        .to_string()
}

/// The field a JSON body's error is about: the path where decoding stopped (`limits.cpu`; an
/// unknown field's path ends with it), with the field a missing field error names under it.
fn field_at(path: &str, message: &str) -> String {
    let path = (path != ".").then_some(path);
    let named = (message.starts_with("unknown field") || message.starts_with("missing field"))
        .then(|| message.split('`').nth(1))
        .flatten();
    match (path, named) {
        (Some(path), Some(field)) if path.rsplit('.').next() == Some(field) => path.to_string(),
        (Some(path), Some(field)) => format!("{path}.{field}"),
        (Some(path), None) => path.to_string(),
        (None, Some(field)) => field.to_string(),
        (None, None) => "body".to_string(),
    }
}

fn bearer(req: &HttpRequest) -> Result<Bearer, ActionError> {
    let header = req
        .headers()
        .get(actix_web::http::header::AUTHORIZATION)
        .ok_or_else(|| {
            ActionError::Unauthenticated("missing Authorization: Bearer token".into())
        })?;
    header
        .to_str()
        .ok()
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(Bearer::new)
        .ok_or_else(|| ActionError::Unauthenticated("malformed Authorization header".into()))
}

fn controller(req: &HttpRequest) -> Result<web::Data<Controller>, ActionError> {
    req.app_data::<web::Data<Controller>>()
        .cloned()
        .ok_or_else(|| ActionError::Internal("controller state missing".into()))
}

/// The token alone, for actions that authenticate on their own connection
/// ([`Controller::db_as`]).
impl FromRequest for Bearer {
    type Error = ActionError;
    type Future = std::future::Ready<Result<Bearer, ActionError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(bearer(req))
    }
}

/// The authenticated caller, resolved before the action runs (a pool checkout of its own).
impl FromRequest for Caller {
    type Error = ActionError;
    type Future = Pin<Box<dyn Future<Output = Result<Caller, ActionError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let token = bearer(req);
        let ctl = controller(req);
        let outcome = AuthOutcome::open(req);
        Box::pin(async move {
            let caller = match (ctl, token) {
                (Ok(ctl), Ok(token)) => authenticate(&ctl, token).await,
                (Err(e), _) | (_, Err(e)) => Err(e),
            };
            outcome.settle(caller.is_ok());
            caller
        })
    }
}

/// A JSON body; a body that does not decode is a 400 naming the field.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for ApiJson<T> {
    type Error = ActionError;
    type Future = Pin<Box<dyn Future<Output = Result<ApiJson<T>, ActionError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = PendingBody::take(req, payload);
        Box::pin(async move {
            let bytes = body.read("body", JSON_LIMIT).await?;
            let bytes = if bytes.iter().all(u8::is_ascii_whitespace) {
                web::Bytes::from_static(b"{}")
            } else {
                bytes
            };
            let mut json = serde_json::Deserializer::from_slice(&bytes);
            serde_path_to_error::deserialize(&mut json)
                .map(ApiJson)
                .map_err(|e| {
                    let field = field_at(&e.path().to_string(), &e.inner().to_string());
                    ActionError::invalid(&field, format!("invalid request body: {}", e.inner()))
                })
        })
    }
}

/// A raw body (a file pushed into an instance) of at most the controller's
/// `limits.file_mib`.
pub struct FileBody(pub web::Bytes);

impl FromRequest for FileBody {
    type Error = ActionError;
    type Future = Pin<Box<dyn Future<Output = Result<FileBody, ActionError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = PendingBody::take(req, payload);
        let limit = controller(req).map(|ctl| ctl.config.limits.file_bytes());
        Box::pin(async move { Ok(FileBody(body.read("body", limit?).await?)) })
    }
}

/// A query string; one that does not decode is a 400 naming the field.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for ApiQuery<T> {
    type Error = ActionError;
    type Future = std::future::Ready<Result<ApiQuery<T>, ActionError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(
            serde_urlencoded::from_str(req.query_string())
                .map(ApiQuery)
                .map_err(|e: serde_urlencoded::de::Error| {
                    ActionError::invalid(&field_of(&e.to_string()), format!("invalid query: {e}"))
                }),
        )
    }
}

/// SHA-256 fingerprint of the certificate the TLS client presented (already verified to chain to
/// the Cohort CA by the TLS layer), stored per connection.
#[derive(Debug, Clone)]
pub struct PeerCertificate(pub String);
