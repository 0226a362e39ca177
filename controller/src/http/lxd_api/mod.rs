//! The LXD-style REST API (`/1.0`) that the real `lxc` client and pylxd speak, served on a
//! listener of its own ([`tls`]). It is a third face over the same actions as the REST API and
//! the portal: a client certificate is resolved to the Cohort user its trust entry binds it to,
//! and that user's roles and ownership decide, in the actions, what it may do.

mod config;
mod create;
mod events;
mod exec;
mod exec_relay;
pub mod exec_sessions;
mod files;
mod fleet;
mod images;
mod instances;
mod listing;
mod moving;
mod operations;
mod reply;
mod server;
mod snapshots;
mod state;
pub mod tls;

use std::future::{ready, Ready};

use actix_web::dev::Payload;
use actix_web::web::{self, delete, get, post, put};
use actix_web::{FromRequest, HttpRequest};

use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::error::ActionError;
use reply::LxdError;

/// The DER certificate the client presented in the TLS handshake.
#[derive(Debug, Clone)]
pub struct LxdPeer(pub Vec<u8>);

impl LxdPeer {
    pub fn fingerprint(&self) -> String {
        crate::nodes::pki::fingerprint(&self.0)
    }
}

/// The credential of an LXD-style request: its client certificate, resolved to a user by the
/// action that answers (a certificate not trusted is refused there, as a 403).
pub struct LxdClient(pub Bearer);

impl FromRequest for LxdClient {
    type Error = LxdError;
    type Future = Ready<Result<LxdClient, LxdError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            req.conn_data::<LxdPeer>()
                .map(|peer| LxdClient(Bearer::lxd_certificate(&peer.fingerprint())))
                .ok_or_else(|| {
                    LxdError::Action(ActionError::Unauthenticated("no client certificate".into()))
                }),
        )
    }
}

type Ctl = web::Data<Controller>;

/// The user behind a client certificate, for actions that take a resolved [`Caller`].
async fn caller_of(ctl: &Controller, client: LxdClient) -> Result<Caller, LxdError> {
    Ok(ctl.db(move |conn| client.0.caller(conn)).await?)
}

/// The largest body an untrusted client's request may announce.
const UNTRUSTED_BODY_BYTES: u64 = 64 << 10;

/// Refuses a request that announces a large body from a client certificate no one trusts,
/// before a byte of the body is read (the REST API's extractors do the same with tokens): only
/// redeeming a trust token (`POST /1.0/certificates`) is open to an untrusted client.
pub async fn untrusted_bodies_refused(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<
    actix_web::dev::ServiceResponse<actix_web::body::EitherBody<impl actix_web::body::MessageBody>>,
    actix_web::Error,
> {
    use actix_web::http::header;
    // A small body is read whole and bounded anyway (`lxc query` sends `""` with a GET); a
    // large one, or one of unknown length, waits for the certificate's trust.
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > UNTRUSTED_BODY_BYTES)
        || req.headers().contains_key(header::TRANSFER_ENCODING);
    let redeeming =
        req.path() == "/1.0/certificates" && req.method() == actix_web::http::Method::POST;
    if announced && !redeeming {
        let trusted = match (req.conn_data::<LxdPeer>(), req.app_data::<Ctl>()) {
            (Some(peer), Some(ctl)) => {
                let bearer = Bearer::lxd_certificate(&peer.fingerprint());
                ctl.db(move |conn| bearer.caller(conn)).await.is_ok()
            }
            _ => false,
        };
        if !trusted {
            let refusal = LxdError::Action(ActionError::Forbidden(
                "this client certificate is not trusted".into(),
            ));
            let (req, _) = req.into_parts();
            let res = actix_web::ResponseError::error_response(&refusal);
            return Ok(actix_web::dev::ServiceResponse::new(req, res).map_into_right_body());
        }
    }
    next.call(req).await.map(|res| res.map_into_left_body())
}

/// Registers `/1.0` with the controller as shared state.
pub fn configure(
    ctl: web::Data<Controller>,
    sessions: web::Data<exec_sessions::ExecSessions>,
    done: web::Data<operations::DoneOperations>,
) -> impl FnOnce(&mut web::ServiceConfig) {
    move |cfg| {
        // What LXD serves and Cohort does not: LXD's error envelope saying so, with the call.
        let unknown = |req: HttpRequest| async move {
            Err::<actix_web::HttpResponse, _>(LxdError::not_supported(format!(
                "{} {}",
                req.method(),
                req.path()
            )))
        };
        cfg.app_data(ctl)
            .app_data(sessions)
            .app_data(done)
            .app_data(
                web::JsonConfig::default()
                    .limit(1 << 20)
                    .error_handler(|e, _| {
                        LxdError::BadRequest(format!("Failed to decode request body: {e}")).into()
                    }),
            )
            .route("/", get().to(server::root))
            .route("/1.0", get().to(server::get))
            .route("/1.0/certificates", get().to(server::certificates))
            .route("/1.0/certificates", post().to(server::add_certificate))
            .route(
                "/1.0/certificates/{fingerprint}",
                get().to(server::certificate),
            )
            .route("/1.0/projects", get().to(listing::projects))
            .route("/1.0/projects/{name}", get().to(listing::project))
            .route("/1.0/cluster", get().to(listing::cluster))
            .route("/1.0/cluster/members", get().to(listing::members))
            .route("/1.0/cluster/members/{name}", get().to(listing::member_get))
            .route("/1.0/instances", get().to(instances::list))
            .route("/1.0/instances", post().to(create::create))
            .route("/1.0/instances/{name}", get().to(instances::get))
            .route("/1.0/instances/{name}", delete().to(state::delete))
            .route("/1.0/instances/{name}", put().to(config::put))
            .route("/1.0/instances/{name}/state", put().to(state::put_state))
            .route("/1.0/instances/{name}/state", get().to(instances::state))
            .route("/1.0/instances/{name}/exec", post().to(exec::exec))
            .route("/1.0/instances/{name}/files", get().to(files::get))
            .route("/1.0/instances/{name}/files", post().to(files::post))
            .route("/1.0/instances/{name}/snapshots", get().to(snapshots::list))
            .route(
                "/1.0/instances/{name}/snapshots",
                post().to(snapshots::create),
            )
            .route(
                "/1.0/instances/{name}/snapshots/{snap}",
                get().to(snapshots::get),
            )
            .route(
                "/1.0/instances/{name}/snapshots/{snap}",
                delete().to(snapshots::delete),
            )
            .route(
                "/1.0/instances/{name}/snapshots/{snap}",
                post().to(snapshots::rename),
            )
            .route(
                "/1.0/instances/{name}/backups",
                get().to(server::no_backups),
            )
            .route(
                "/1.0/instances/{name}/backups",
                post().to(server::not_supported),
            )
            .route("/1.0/images", get().to(images::list))
            .route("/1.0/images", post().to(images::upload))
            .route("/1.0/images/aliases", get().to(images::aliases))
            .route("/1.0/images/aliases", post().to(images::add_alias))
            .route("/1.0/images/aliases/{name:.*}", get().to(images::alias))
            .route("/1.0/images/{fingerprint}", get().to(images::get))
            .route("/1.0/images/{fingerprint}", delete().to(images::delete))
            .route("/1.0/images/{fingerprint}", put().to(images::put))
            .route("/1.0/images/{fingerprint}/export", get().to(images::export))
            .route("/1.0/operations", get().to(operations::list))
            .route("/1.0/operations/{id}", get().to(operations::get))
            .route("/1.0/operations/{id}/wait", get().to(operations::wait))
            .route("/1.0/operations/{id}/websocket", get().to(exec::websocket))
            .route("/1.0/events", get().to(events::events))
            .route("/1.0/profiles", get().to(server::not_supported))
            .route("/1.0/networks", get().to(fleet::networks))
            .route("/1.0/networks", post().to(fleet::network_change))
            .route("/1.0/networks/{name}", get().to(fleet::network_get))
            .route("/1.0/networks/{name}", web::to(fleet::network_change))
            .route("/1.0/storage-pools", get().to(fleet::pools))
            .route("/1.0/storage-pools", post().to(fleet::pool_change))
            .route("/1.0/storage-pools/{name}", get().to(fleet::pool_get))
            .route(
                "/1.0/storage-pools/{name}/resources",
                get().to(fleet::pool_resources),
            )
            .route("/1.0/storage-pools/{name}", web::to(fleet::pool_change))
            .route("/1.0/instances/{name}", post().to(moving::post))
            .route(
                "/1.0/instances/{name}/console",
                get().to(moving::console_log),
            )
            .route(
                "/1.0/instances/{name}/console",
                post().to(moving::console_attach),
            )
            .route(
                "/1.0/instances/{name}/console",
                delete().to(moving::console_clear),
            )
            .route("/1.0/virtual-machines", get().to(server::not_supported))
            .default_service(web::to(unknown));
    }
}

/// A request field LXD decodes with Go's rules: `null` leaves it at its zero value. pylxd sends
/// `"user": null, "group": null, "cwd": null` with every `execute`, and LXD takes it.
fn null_is_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    use serde::Deserialize;
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
