//! The HTTP layer: routes to handlers that only parse, call an action and answer. Roles and
//! ownership are enforced by the actions, so no route can forget them. The routes of `/api/v1`
//! are declared once, in `routes`, which the OpenAPI document reads too.

mod audit;
mod batch_jobs;
mod body;
pub(crate) mod course_archives;
mod course_data;
mod courses;
mod error;
mod extract;
mod gpu_leases;
mod gpus;
pub(crate) mod images;
mod instances;
mod lxd_trust;
mod meta;
mod nodes;
mod operations;
mod orphans;
mod routes;
mod throttle;
mod usage;
mod users;

pub use extract::{FileBody, PeerCertificate};
pub use routes::{routes, Route, SchemaFn};

use actix_web::dev::{Service, ServiceResponse};
use actix_web::middleware::from_fn;
use actix_web::web::{self, get};

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
            .service(routes::register(web::scope("/api/v1")).wrap(from_fn(throttle::throttle)))
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
