//! The portal's way into a notebook: `GET /jupyter/{container}/...` on the portal's origin checks
//! the signed-in browser may open the container's JupyterLab, makes a one-use ticket bound to
//! the container and the portal session, and sends the browser to the notebook's own origin
//! with it ([`super::origin`]). Nothing of the container is ever served on the portal's origin.

use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use chrono::Utc;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

use crate::app::state::Controller;
use crate::error::ActionError;
use crate::http::portal::{PortalError, SignedIn};
use crate::instances::notebook;

/// How long a ticket may wait in the redirect before it is traded for a pass.
const TICKET_SECONDS: i64 = 60;

/// Sends a signed-in browser that may open `name`'s JupyterLab to the notebook's own origin.
pub async fn open(
    req: HttpRequest,
    ctl: web::Data<Controller>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PortalError> {
    let signed_in = SignedIn::extract(&req).await?;
    let lang = signed_in.lang;
    let failed = |e: ActionError| PortalError::Action(lang, e);
    let (name, rest) = path.into_inner();
    if super::proxy::is_websocket(&req) {
        return Err(failed(ActionError::invalid(
            "upgrade",
            format!(
                "{name}'s JupyterLab is served on its own origin ({}), not the portal's",
                ctl.config.notebook_origin(&name)
            ),
        )));
    }
    let granted = notebook::authorize(&ctl, signed_in.caller, name.clone())
        .await
        .map_err(failed)?;
    let ticket = crate::accounts::auth::new_secret();
    let hash = crate::accounts::auth::sha256(&ticket);
    let (session_id, instance_id) = (signed_in.session_id, granted.instance.id);
    notebook::make_ticket(
        &ctl,
        hash,
        session_id,
        instance_id,
        Utc::now() + chrono::Duration::seconds(TICKET_SECONDS),
    )
    .await
    .map_err(failed)?;
    let mut next = format!("/jupyter/{name}/{rest}");
    if !req.query_string().is_empty() {
        next.push('?');
        next.push_str(req.query_string());
    }
    let location = format!(
        "{}{}?ticket={ticket}&next={}",
        ctl.config.notebook_origin(&name),
        super::origin::ENTER_PATH,
        utf8_percent_encode(&next, NON_ALPHANUMERIC)
    );
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .finish())
}
