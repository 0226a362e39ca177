//! Whether the controller is healthy (`/healthz`): its database answers.

use crate::app::state::Controller;
use crate::error::ActionResult;

/// `Ok` when the database answers a query.
pub async fn database_answers(ctl: &Controller) -> ActionResult<()> {
    ctl.db(|conn| {
        crate::db::ping(conn)?;
        Ok(())
    })
    .await
}
