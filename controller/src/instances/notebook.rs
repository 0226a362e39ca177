//! A container's JupyterLab behind the portal: who may reach it (its owner, and its course's
//! instructor where the course allows it: `PUT /courses/{code}/jupyter`; everyone else, admins
//! included, is refused, as they have other ways in; the container must be placed on a node
//! whose agent the controller can reach over mutual TLS), and the one-use tickets and the
//! passes that let a browser in (`crate::http::jupyter` serves them).

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::accounts::auth::Caller;
use crate::agent_client::NodeAgent;
use crate::app::state::{connect_node, Controller};
use crate::db::models::course::Course;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::notebook_pass::NotebookPass;
use crate::db::models::user::User;
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

/// Whether `caller` teaches `instance`'s course (instructor or staff) and the course lets its
/// instructors in.
fn course_instructor_let_in(
    conn: &mut diesel::PgConnection,
    instance: &Instance,
    caller: &Caller,
) -> ActionResult<bool> {
    let Some(course_id) = instance.course_id else {
        return Ok(false);
    };
    let allowed = Course::jupyter_instructors(conn, course_id)?;
    Ok(allowed && crate::courses::course::teaches(conn, caller, course_id)?)
}

/// Makes a one-use ticket (hash `hash`, until `expires`) that lets the browser of portal session
/// `session_id` into instance `instance_id`'s notebook, clearing expired tickets and passes.
pub async fn make_ticket(
    ctl: &Controller,
    hash: Vec<u8>,
    session_id: i64,
    instance_id: i64,
    expires: DateTime<Utc>,
) -> ActionResult<()> {
    ctl.db(move |conn| {
        NotebookPass::delete_expired(conn)?;
        NotebookPass::insert(conn, &hash, true, session_id, instance_id, expires)?;
        Ok(())
    })
    .await
}

/// Trades the ticket `hash` for `instance` for a pass (hash `pass_hash`, until `expires`);
/// `false` when the ticket was used already or has expired.
pub async fn trade_ticket(
    ctl: &Controller,
    hash: Vec<u8>,
    instance: String,
    pass_hash: Vec<u8>,
    expires: DateTime<Utc>,
) -> ActionResult<bool> {
    ctl.db(move |conn| {
        let Some(ticket) = NotebookPass::take_ticket(conn, &hash, &instance)? else {
            return Ok(false);
        };
        NotebookPass::insert(
            conn,
            &pass_hash,
            false,
            ticket.session_id,
            ticket.instance_id,
            expires,
        )?;
        Ok(true)
    })
    .await
}

/// The account whose pass (hash `hash`) opens `name`'s notebook, if it is live.
pub async fn pass_holder(
    ctl: &Controller,
    hash: Vec<u8>,
    name: String,
) -> ActionResult<Option<User>> {
    ctl.db(move |conn| Ok(NotebookPass::holder(conn, &hash, &name)?))
        .await
}
