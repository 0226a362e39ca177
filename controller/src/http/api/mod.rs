//! The HTTP layer: routes to handlers that only parse, call an action and answer. Roles and
//! ownership are enforced by the actions, so no route can forget them.

mod audit;
mod body;
mod courses;
mod error;
mod extract;
mod gpus;
mod images;
mod instances;
mod lxd_trust;
mod meta;
mod nodes;
mod operations;
mod orphans;
mod throttle;
mod users;

pub use extract::{FileBody, PeerCertificate};

use actix_web::dev::{Service, ServiceResponse};
use actix_web::middleware::from_fn;
use actix_web::web::{self, delete, get, patch, post, put};

use crate::app::state::Controller;
use crate::error::ActionError;

/// Registers every route with the controller as shared state.
pub fn configure(ctl: web::Data<Controller>) -> impl FnOnce(&mut web::ServiceConfig) {
    move |cfg| {
        let unknown = |_: actix_web::HttpRequest| async {
            Err::<actix_web::HttpResponse, _>(ActionError::NotFound("route".into()))
        };
        // A notebook's own host answers its notebook only: first, before any other route.
        let notebooks =
            crate::http::jupyter::origin::NotebookHost(ctl.config.server.notebook_domain.clone());
        cfg.app_data(ctl)
            .service(
                web::scope("")
                    .guard(notebooks)
                    .default_service(web::to(crate::http::jupyter::origin::serve)),
            )
            // Bodies are read by `body::PendingBody` with a limit per route; this bounds any
            // plain `web::Bytes` a route might still take. Image uploads and rosters stream.
            .app_data(web::PayloadConfig::new(extract::JSON_LIMIT))
            // A path segment of the wrong type (`/operations/abc`) names nothing that exists:
            // the same JSON 404 as an unknown route, never actix's plain-text one.
            .app_data(
                web::PathConfig::default()
                    .error_handler(|_, req| ActionError::NotFound(req.path().to_string()).into()),
            )
            .route("/healthz", get().to(meta::healthz))
            .service(
                web::resource("/metrics")
                    .wrap(from_fn(throttle::throttle))
                    .route(get().to(meta::metrics)),
            )
            .service(
                web::scope("/api/v1")
                    .wrap(from_fn(throttle::throttle))
                    .route("/openapi.json", get().to(meta::openapi))
                    .route("/ca", get().to(nodes::ca))
                    .route("/enroll", post().to(nodes::enroll))
                    .route("/me", get().to(users::me))
                    .route("/me/ssh-keys", post().to(users::add_ssh_key))
                    .route("/me/ssh-keys/{id}", delete().to(users::delete_ssh_key))
                    .route("/users", get().to(users::list))
                    .route("/users", post().to(users::create))
                    .route("/users/{username}", delete().to(users::delete))
                    .route("/users/{username}/disable", post().to(users::disable))
                    .route("/users/{username}/enable", post().to(users::enable))
                    .route("/users/{username}/role", put().to(users::set_role))
                    .route("/users/{username}/tokens", get().to(users::list_tokens))
                    .route("/users/{username}/tokens", post().to(users::issue_token))
                    .route(
                        "/users/{username}/tokens/{id}",
                        delete().to(users::revoke_token),
                    )
                    .route("/nodes", get().to(nodes::list))
                    .route("/nodes/tokens", post().to(nodes::create_token))
                    .route("/nodes/{name}", get().to(nodes::get))
                    .route("/nodes/{name}", delete().to(nodes::remove))
                    .route("/nodes/{name}/cordon", post().to(nodes::cordon))
                    .route("/nodes/{name}/evacuate", post().to(nodes::evacuate))
                    .route("/nodes/{name}/restore", post().to(nodes::restore))
                    .route("/orphans", get().to(orphans::list))
                    .route("/orphans/{node}/{name}", delete().to(orphans::delete))
                    .route("/orphans/{node}/{name}/adopt", post().to(orphans::adopt))
                    .route("/gpus", get().to(gpus::list))
                    .route("/gpus/{uuid}", patch().to(gpus::update))
                    .route("/images", get().to(images::list))
                    .route("/images", post().to(images::import))
                    .route("/images/publish", post().to(images::publish))
                    .route("/images/{name}", get().to(images::get))
                    .route("/images/{name}", delete().to(images::delete))
                    .route("/images/{name}", patch().to(images::rename))
                    .route("/images/{name}/tarball", get().to(images::tarball))
                    .route("/images/{name}/distribute", post().to(images::distribute))
                    .route("/instances", get().to(instances::list))
                    .route("/instances", post().to(instances::create))
                    .route("/instances/{name}", get().to(instances::get))
                    .route("/instances/{name}", delete().to(instances::delete))
                    .route("/instances/{name}", patch().to(instances::update))
                    .route("/instances/{name}/config", get().to(instances::live_config))
                    .route("/instances/{name}/state", put().to(instances::change_state))
                    .route(
                        "/instances/{name}/move",
                        post().to(instances::move_instance),
                    )
                    .route("/instances/{name}/exec", post().to(instances::exec))
                    .route("/instances/{name}/files", get().to(instances::get_file))
                    .route("/instances/{name}/files", put().to(instances::put_file))
                    .route(
                        "/instances/{name}/snapshots",
                        get().to(instances::snapshots),
                    )
                    .route(
                        "/instances/{name}/snapshots",
                        post().to(instances::create_snapshot),
                    )
                    .route(
                        "/instances/{name}/snapshots/{snapshot}/restore",
                        post().to(instances::restore_snapshot),
                    )
                    .route(
                        "/instances/{name}/snapshots/{snapshot}",
                        delete().to(instances::delete_snapshot),
                    )
                    .route("/courses", get().to(courses::list))
                    .route("/courses", post().to(courses::create))
                    .route("/courses/{code}", get().to(courses::get))
                    .route("/courses/{code}", delete().to(courses::delete))
                    .route("/courses/{code}/quota", put().to(courses::set_quota))
                    .route("/courses/{code}/home", put().to(courses::set_home))
                    .route("/courses/{code}/limits", put().to(courses::set_limits))
                    .route("/courses/{code}/jupyter", put().to(courses::set_jupyter))
                    .route("/courses/{code}/network", put().to(courses::set_network))
                    .route("/courses/{code}/roster", post().to(courses::import_roster))
                    .route("/courses/{code}/students", get().to(courses::students))
                    .route(
                        "/courses/{code}/students/{username}",
                        delete().to(courses::remove_student),
                    )
                    // Before `{action}`, which would otherwise take `password` and `snapshots`.
                    .route(
                        "/courses/{code}/students/{username}/password",
                        post().to(courses::reissue_password),
                    )
                    .route(
                        "/courses/{code}/students/{username}/snapshots",
                        get().to(courses::student_snapshots),
                    )
                    .route(
                        "/courses/{code}/students/{username}/snapshots",
                        post().to(courses::student_snapshot),
                    )
                    .route(
                        "/courses/{code}/students/{username}/snapshots/{snapshot}/restore",
                        post().to(courses::student_restore),
                    )
                    .route(
                        "/courses/{code}/students/{username}/{action}",
                        post().to(courses::student_action),
                    )
                    .route("/courses/{code}/provision", post().to(courses::provision))
                    .route("/courses/{code}/endpoints", get().to(courses::endpoints))
                    .route("/courses/{code}/teardown", post().to(courses::teardown))
                    .route("/lxd/trust", get().to(lxd_trust::list))
                    .route("/lxd/trust", post().to(lxd_trust::create))
                    .route("/lxd/trust/{name}", delete().to(lxd_trust::remove))
                    .route("/audit", get().to(audit::list))
                    .route("/operations", get().to(operations::list))
                    .route("/operations/{id}", get().to(operations::get))
                    .route("/operations/{id}/wait", get().to(operations::wait)),
            )
            .configure(crate::http::portal::routes)
            .default_service(web::to(unknown));
    }
}

/// Counts every answer by status, and times it by method and matched route, for `/metrics`.
pub fn count_status<S, B>(
    req: actix_web::dev::ServiceRequest,
    srv: &S,
) -> impl std::future::Future<Output = Result<ServiceResponse<B>, actix_web::Error>>
where
    S: Service<
        actix_web::dev::ServiceRequest,
        Response = ServiceResponse<B>,
        Error = actix_web::Error,
    >,
{
    let ctl = req.app_data::<web::Data<Controller>>().cloned();
    let began = std::time::Instant::now();
    let fut = srv.call(req);
    async move {
        let res = fut.await?;
        if let Some(ctl) = ctl {
            let route = res
                .request()
                .match_pattern()
                .unwrap_or_else(|| "unmatched".to_string());
            ctl.metrics
                .request_duration
                .get_or_create(&crate::app::metrics::RouteLabels {
                    method: res.request().method().to_string(),
                    route,
                })
                .observe(began.elapsed().as_secs_f64());
            ctl.metrics
                .http_requests
                .get_or_create(&crate::app::metrics::RequestLabels {
                    status: res.status().as_u16(),
                })
                .inc();
        }
        Ok(res)
    }
}
