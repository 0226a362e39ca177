//! Request bodies read with a bound and only after the caller is known: a body larger than its
//! route allows is a 413 before any of it is kept (a declared `Content-Length` is refused
//! unread), and on an authenticated route nothing is read or parsed until the token has passed,
//! so a bad token is a 401 whatever the body holds.

use actix_web::dev::{Decompress, Payload};
use actix_web::http::header::CONTENT_LENGTH;
use actix_web::{web, HttpMessage, HttpRequest};
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::error::ActionError;

/// Whether the request's caller has been authenticated: `None` while the token is being
/// checked. Left in the request by the authenticating extractor, which comes before any body in
/// a handler's arguments (actix starts every extractor of a handler at once).
#[derive(Clone)]
pub(super) struct AuthGate(watch::Receiver<Option<bool>>);

/// The sending half of an [`AuthGate`], held by the authentication in flight.
pub(super) struct AuthOutcome(watch::Sender<Option<bool>>);

impl AuthOutcome {
    /// Opens the gate on `req` that bodies of the same request wait on.
    pub(super) fn open(req: &HttpRequest) -> AuthOutcome {
        let (outcome, gate) = watch::channel(None);
        req.extensions_mut().insert(AuthGate(gate));
        AuthOutcome(outcome)
    }

    pub(super) fn settle(self, authenticated: bool) {
        // No receiver left only means no body waits.
        let _ = self.0.send(Some(authenticated));
    }
}

impl AuthGate {
    /// True once the caller has passed; false if authentication failed or was dropped.
    async fn passed(mut self) -> bool {
        match self.0.wait_for(Option::is_some).await {
            Ok(outcome) => *outcome == Some(true),
            Err(_) => false,
        }
    }
}

/// A body about to be read: the payload taken from the request, its declared length, and the
/// gate of the request's authentication if the route has one.
pub(super) struct PendingBody {
    payload: Decompress<Payload>,
    declared: Option<u64>,
    gate: Option<AuthGate>,
}

impl PendingBody {
    pub(super) fn take(req: &HttpRequest, payload: &mut Payload) -> PendingBody {
        let declared = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        PendingBody {
            // Counted after decompression, so a small compressed body cannot unpack past the limit.
            payload: Decompress::from_headers(payload.take(), req.headers()),
            declared,
            gate: req.extensions().get::<AuthGate>().cloned(),
        }
    }

    /// Reads at most `limit` bytes once the caller has passed; `field` names the body in errors.
    pub(super) async fn read(
        mut self,
        field: &str,
        limit: usize,
    ) -> Result<web::Bytes, ActionError> {
        if let Some(gate) = self.gate.take() {
            if !gate.passed().await {
                return Err(ActionError::Unauthenticated("invalid API token".into()));
            }
        }
        let too_large = || ActionError::TooLarge {
            field: field.to_string(),
            limit,
        };
        if self.declared.is_some_and(|n| n > limit as u64) {
            return Err(too_large());
        }
        let mut body = web::BytesMut::new();
        while let Some(chunk) = self.payload.next().await {
            let chunk = chunk.map_err(|e| ActionError::invalid(field, e.to_string()))?;
            if body.len() + chunk.len() > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    }
}
