//! Who may read `/metrics`: its labels name every course, so Prometheus scrapes it with the
//! configured metrics token (`COHORT_METRICS_TOKEN`) or an admin's API token; anyone else is
//! refused (401 without a valid token, 403 with a non-admin's).

use cohort_proto::api::users::Role;

use crate::accounts::auth::Bearer;
use crate::app::state::Controller;
use crate::error::ActionResult;

/// The Prometheus text of this controller's metrics and the fleet read now.
pub async fn scrape(ctl: &Controller, bearer: Bearer) -> ActionResult<String> {
    let by_token = ctl
        .config
        .auth
        .metrics_token
        .as_deref()
        .is_some_and(|token| bearer.is(token));
    let fleet = ctl
        .db(move |conn| {
            if !by_token {
                bearer.caller(conn)?.require(Role::Admin)?;
            }
            Ok(crate::app::metrics::read_fleet(conn)?)
        })
        .await?;
    ctl.metrics.set_fleet(&fleet);
    Ok(ctl.metrics.render())
}
