//! The page shell every portal page shares: header with the language switcher and sign-out,
//! the embedded stylesheet and script, and the headers that keep pages out of frames and other
//! origins' scripts out of pages.

use actix_web::http::{header, StatusCode};
use actix_web::HttpResponse;
use maud::{html, Markup, DOCTYPE};

use super::i18n::{Lang, Msg};
use super::session::SignedIn;

/// The `Content-Security-Policy` of every page: only this origin's own script and style.
const CSP: &str = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";

/// A complete HTML page.
pub fn page(
    status: StatusCode,
    lang: Lang,
    signed_in: Option<&SignedIn>,
    title: &str,
    body: Markup,
) -> HttpResponse {
    let markup = html! {
        (DOCTYPE)
        html lang=(lang.tag()) {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · " (lang.t(Msg::Title)) }
                link rel="stylesheet" href="/static/portal.css";
                script src="/static/portal.js" defer {}
            }
            body {
                header {
                    a.brand href="/" { (lang.t(Msg::Title)) }
                    nav aria-label=(lang.t(Msg::Language)) {
                        @for other in Lang::ALL {
                            @if other == lang {
                                span.lang aria-current="true" { (other.own_name()) }
                            } @else {
                                a.lang href={ "/lang/" (other.tag()) } hreflang=(other.tag()) {
                                    (other.own_name())
                                }
                            }
                        }
                    }
                    @if let Some(s) = signed_in {
                        @if s.caller.role >= cohort_proto::api::users::Role::Instructor {
                            a #courses-link href="/courses" { (lang.t(Msg::MyCourses)) }
                        }
                        @if s.caller.is_admin() {
                            a #admin-link href="/admin" { (lang.t(Msg::Admin)) }
                        }
                        a #jobs-link href="/jobs" { (lang.t(Msg::Jobs)) }
                        a #account-link href="/account" { (lang.t(Msg::Account)) }
                        form.signout method="post" action="/signout" {
                            span { (lang.t(Msg::SignedInAs)) " " strong #whoami { (s.caller.name()) } }
                            input type="hidden" name="csrf" value=(s.csrf);
                            button type="submit" { (lang.t(Msg::SignOut)) }
                        }
                    }
                }
                main { h1 { (title) } (body) }
            }
        }
    };
    HttpResponse::build(status)
        .insert_header((header::CONTENT_TYPE, "text/html; charset=utf-8"))
        .insert_header((header::CONTENT_SECURITY_POLICY, CSP))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "same-origin"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(markup.into_string())
}

/// A signed-in page with status 200.
pub fn ok(s: &SignedIn, title: &str, body: Markup) -> HttpResponse {
    page(StatusCode::OK, s.lang, Some(s), title, body)
}
