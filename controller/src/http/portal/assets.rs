//! The stylesheet and script, compiled into the binary: no build step and nothing to install
//! next to it.

use actix_web::http::header;
use actix_web::{web, HttpResponse};

const CSS: &str = include_str!("static/portal.css");
const JS: &str = include_str!("static/portal.js");

pub async fn asset(file: web::Path<String>) -> HttpResponse {
    let (body, kind) = match file.as_str() {
        "portal.css" => (CSS, "text/css; charset=utf-8"),
        "portal.js" => (JS, "text/javascript; charset=utf-8"),
        _ => return HttpResponse::NotFound().finish(),
    };
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, kind))
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(body)
}
