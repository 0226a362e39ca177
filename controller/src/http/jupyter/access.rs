//! Who may reach a container's JupyterLab through the portal: its owner, and its course's
//! instructor where the course allows it (`PUT /courses/{code}/jupyter`). Everyone else, admins
//! included, is refused (they have other ways in); the container must be placed on a node whose
//! agent the controller can reach over mutual TLS.

use std::sync::Arc;

use crate::accounts::auth::Caller;
use crate::agent_client::NodeAgent;
use crate::app::state::{connect_node, Controller};
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::error::{ActionError, ActionResult};

/// The container the caller may open, and its node's agent.
pub struct Granted {
    pub instance: Instance,
    pub agent: Arc<dyn NodeAgent>,
}

/// Whether `caller` may open `name`'s JupyterLab; the refusal says why (403, 404, 409).
pub async fn authorize(ctl: &Controller, caller: Caller, name: String) -> ActionResult<Granted> {
    let agents = ctl.agents.clone();
    ctl.db(move |conn| {
        let instance = Instance::by_name(conn, &name)?
            .ok_or_else(|| ActionError::NotFound(format!("no container named {name}")))?;
        if instance.owner_id != caller.user.id
            && !course_instructor_let_in(conn, &instance, &caller)?
        {
            return Err(ActionError::Forbidden(format!(
                "{name}'s JupyterLab is open to its owner only"
            )));
        }
        let node_id = instance.node_id.ok_or_else(|| {
            ActionError::conflict(None, format!("{name} is not placed on a node yet"))
        })?;
        let node = Node::find(conn, node_id)?;
        let agent = connect_node(agents.as_ref(), conn, &node)?;
        Ok(Granted { instance, agent })
    })
    .await
}

/// Whether `caller` is the instructor of `instance`'s course and the course lets its
/// instructors in.
fn course_instructor_let_in(
    conn: &mut diesel::PgConnection,
    instance: &Instance,
    caller: &Caller,
) -> ActionResult<bool> {
    use crate::db::schema::courses;
    use diesel::prelude::*;
    let Some(course_id) = instance.course_id else {
        return Ok(false);
    };
    let (instructor_id, allowed): (i64, bool) = courses::table
        .find(course_id)
        .select((courses::instructor_id, courses::jupyter_instructors))
        .first(conn)?;
    Ok(allowed && instructor_id == caller.user.id)
}
