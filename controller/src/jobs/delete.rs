//! The `delete` step: the container (absent is fine), its home volume when a teardown says so,
//! then its row, which frees its port and GPU slots. A queued instance has no node, but its home
//! may outlive an earlier container (a teardown that kept homes, then a re-provision that
//! queued): every node is asked to delete it, so a deleted course leaves no volume behind.

use super::outcome::StepOutcome;
use super::Job;
use crate::app::state::Controller;
use crate::db::models::instance::Instance;
use crate::db::models::kept_home::KeptHome;
use crate::db::models::node::Node;
use crate::db::models::operation_item::OperationItem;
use crate::error::ActionError;
use crate::placement::home_size::home_volume;

/// Deletes the container (absent is fine), and for a teardown without `keep_homes` its home
/// volume, then the row, which frees its port and GPU slots.
pub async fn run(
    ctl: &Controller,
    job: &Job,
    item: &OperationItem,
    instance: Instance,
) -> Result<StepOutcome, ActionError> {
    if let Some(node_id) = instance.node_id {
        let item_id = item.id;
        ctl.db(move |conn| Ok(OperationItem::start_attempt(conn, item_id)?))
            .await?;
        let (node, agent) = ctl.agent_by_node_id(node_id).await?;
        agent
            .delete_instance(instance.name.clone())
            .await
            .map_err(ActionError::on_node(&node.name))?;
        let wiped = instance.course_id.is_some()
            && job.wipes_homes()
            && super::archive::home_may_go(ctl, job, item, instance.id).await?;
        if wiped {
            agent
                .delete_volume(home_volume(&instance.name))
                .await
                .map_err(ActionError::on_node(&node.name))?;
        }
        // A course home that stays is where the next container of this name is placed.
        if instance.course_id.is_some() {
            let (name, course) = (instance.name.clone(), instance.course_id);
            ctl.db(move |conn| {
                if wiped {
                    KeptHome::forget(conn, &name)?;
                } else {
                    KeptHome::record(conn, &name, node_id, course)?;
                }
                Ok(())
            })
            .await?;
        }
    } else if instance.course_id.is_some() && job.wipes_homes() {
        wipe_home_anywhere(ctl, &instance.name).await?;
        let name = instance.name.clone();
        ctl.db(move |conn| Ok(KeptHome::forget(conn, &name)?))
            .await?;
    }
    let id = instance.id;
    ctl.db(move |conn| Ok(Instance::delete(conn, id)?)).await?;
    ctl.capacity_freed.notify_waiters();
    Ok(StepOutcome::Done)
}

/// Deletes course home `home-<name>` wherever it is: every node is asked (absent is fine there).
/// A node that does not answer fails the step, which the worker retries: a home is not left
/// behind because its node was away when its course went.
async fn wipe_home_anywhere(ctl: &Controller, name: &str) -> Result<(), ActionError> {
    let nodes = ctl.db(|conn| Ok(Node::list(conn)?)).await?;
    for node in nodes {
        let (node, agent) = ctl.agent_by_node_id(node.id).await?;
        agent
            .delete_volume(home_volume(name))
            .await
            .map_err(ActionError::on_node(&node.name))?;
    }
    Ok(())
}
