//! The web portal, served by the controller on its HTTPS listener beside `/api/v1`: pages
//! rendered with maud (markup checked at compile time, escaped by default, compiled into the
//! binary), an embedded stylesheet and script, cookie sessions with CSRF tokens, and three
//! languages. Handlers only parse, call the same actions as the REST API, and render.

mod account;
mod admin;
mod admin_fleet;
mod admin_users;
mod archives;
mod assets;
mod batch_jobs;
mod containers;
mod course_data;
mod course_limits;
mod course_network;
mod course_roster;
mod courses;
mod create_container;
mod error;
mod gpu_lease;
mod gpu_time;
mod home_snapshots;
pub mod i18n;
mod layout;
mod session;
mod sign_in;
mod students;
mod tokens;
pub(crate) mod words;

use actix_web::web::{self, get, post};

pub use error::PortalError;
pub use session::{SignedIn, SESSION_COOKIE, SIGN_IN_COOKIE};

/// Registers the portal's routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", get().to(containers::home))
        .route("/signin", get().to(sign_in::page))
        .route("/signin", post().to(sign_in::submit))
        .route("/signout", post().to(sign_in::sign_out))
        .route("/lang/{tag}", get().to(sign_in::switch_language))
        .route("/static/{file}", get().to(assets::asset))
        .route("/containers", post().to(create_container::create))
        .route("/containers/{name}", get().to(containers::show))
        .route(
            "/containers/{name}/state",
            post().to(containers::change_state),
        )
        .route(
            "/containers/{name}/keep-working",
            post().to(containers::keep_working),
        )
        .route(
            "/containers/{name}/gpus/attach-again",
            post().to(containers::attach_gpus_again),
        )
        .route(
            "/containers/{name}/home/restore",
            post().to(home_snapshots::restore),
        )
        .route(
            "/containers/{name}/home/restore-path",
            post().to(home_snapshots::restore_path),
        )
        .route("/containers/{name}/gpu-lease", post().to(gpu_lease::attach))
        .route(
            "/containers/{name}/gpu-lease/release",
            post().to(gpu_lease::release),
        )
        .route("/account", get().to(account::page))
        .route("/account/keys", post().to(account::add_key))
        .route("/account/keys/{id}/delete", post().to(account::remove_key))
        .route("/account/password", post().to(account::change_password))
        .route("/account/tokens", get().to(tokens::page))
        .route("/account/tokens", post().to(tokens::create))
        .route("/account/tokens/{id}/revoke", post().to(tokens::revoke))
        .route("/courses", get().to(courses::list))
        .route("/courses", post().to(courses::create))
        .route("/courses/{code}", get().to(courses::show))
        .route(
            "/courses/{code}/students/{username}",
            get().to(students::page),
        )
        .route(
            "/courses/{code}/students/{username}/snapshots",
            post().to(students::snapshot),
        )
        .route(
            "/courses/{code}/students/{username}/snapshots/{snapshot}/restore",
            post().to(students::restore),
        )
        .route(
            "/courses/{code}/teardown",
            post().to(students::teardown_course),
        )
        .route(
            "/courses/{code}/students/{username}/remove",
            post().to(students::remove),
        )
        .route(
            "/courses/{code}/students/{username}/{action}",
            post().to(courses::student_action),
        )
        .route(
            "/courses/{code}/archive/{username}",
            get().to(archives::download),
        )
        .route("/courses/{code}/roster", post().to(course_roster::import))
        .route("/courses/{code}/data", post().to(course_data::upload))
        .route("/courses/{code}/limits", post().to(course_limits::set))
        .route("/courses/{code}/network", post().to(course_network::set))
        .route("/courses/{code}/provision", post().to(courses::provision))
        .route(
            "/courses/{code}/endpoints/{format}",
            get().to(courses::download),
        )
        .route("/progress/{id}", get().to(courses::progress))
        .route("/jobs", get().to(batch_jobs::page))
        .route("/jobs", post().to(batch_jobs::submit))
        .route("/jobs/{id}", get().to(batch_jobs::show))
        .route("/jobs/{id}/log", get().to(batch_jobs::log))
        .route("/jobs/{id}/cancel", post().to(batch_jobs::cancel))
        .route("/usage", get().to(gpu_time::page))
        .route("/usage.csv", get().to(gpu_time::csv))
        .route("/admin", get().to(admin::page))
        .route("/admin/nodes/{name}/cordon", post().to(admin_fleet::cordon))
        .route(
            "/admin/nodes/{name}/restore",
            post().to(admin_fleet::restore),
        )
        .route(
            "/admin/nodes/{name}/evacuate",
            get().to(admin_fleet::confirm_evacuate),
        )
        .route(
            "/admin/nodes/{name}/evacuate",
            post().to(admin_fleet::evacuate),
        )
        .route(
            "/admin/users/{username}/role",
            post().to(admin_users::set_role),
        )
        .route(
            "/jupyter/{name}/{rest:.*}",
            get().to(crate::http::jupyter::entry::open),
        );
}
