//! How a page fails: a browser that is not signed in is sent to the sign-in page; a refused form,
//! a forbidden or missing object or any other action error is an HTML page in the reader's
//! language with the status the REST API would answer.

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};

use super::i18n::{Lang, Msg};
use super::layout;
use crate::error::ActionError;

#[derive(Debug, thiserror::Error)]
pub enum PortalError {
    /// no live session: sign in first
    #[error("sign in first")]
    SignInFirst,
    /// a form without the session's CSRF token
    #[error("the form's CSRF token is missing or wrong")]
    CsrfRefused(Lang),
    /// a form body that does not decode or is too large
    #[error("the form could not be read")]
    BadForm(Lang),
    /// the action refused or failed
    #[error("{1}")]
    Action(Lang, ActionError),
}

impl PortalError {
    /// The message the page shows: the catalog's words for the common refusals, the action's own
    /// message (English, naming the field) otherwise.
    fn message(&self) -> (Lang, String) {
        match self {
            PortalError::SignInFirst => (Lang::En, String::new()),
            PortalError::CsrfRefused(l) => (*l, l.t(Msg::FormExpired).into()),
            PortalError::BadForm(l) => (*l, l.t(Msg::SomethingFailed).into()),
            PortalError::Action(l, e) => match e {
                ActionError::Forbidden(_) => (*l, l.t(Msg::Forbidden).into()),
                ActionError::NotFound(_) | ActionError::Missing { .. } => {
                    (*l, l.t(Msg::NotFound).into())
                }
                ActionError::Throttled { .. } => (*l, l.t(Msg::TooManyFailures).into()),
                e if e.status_code().is_server_error() => (*l, l.t(Msg::SomethingFailed).into()),
                e => (*l, e.to_string()),
            },
        }
    }
}

impl ResponseError for PortalError {
    fn status_code(&self) -> StatusCode {
        match self {
            PortalError::SignInFirst => StatusCode::SEE_OTHER,
            PortalError::CsrfRefused(_) => StatusCode::FORBIDDEN,
            PortalError::BadForm(_) => StatusCode::BAD_REQUEST,
            // An expired session mid-action is a sign-in, not an error page.
            PortalError::Action(_, ActionError::Unauthenticated(_)) => StatusCode::SEE_OTHER,
            PortalError::Action(_, e) => e.status_code(),
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        if status == StatusCode::SEE_OTHER {
            return HttpResponse::SeeOther()
                .insert_header((header::LOCATION, "/signin"))
                .finish();
        }
        if status.is_server_error() {
            tracing::error!(error = %self, "portal page failed");
        }
        let (lang, message) = self.message();
        layout::page(
            status,
            lang,
            None,
            lang.t(Msg::Title),
            maud::html! {
                p.error role="alert" { (message) }
                p { a href="/" { (lang.t(Msg::Back)) } }
            },
        )
    }
}
