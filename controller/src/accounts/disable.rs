//! An account's life after creation, by an admin: disable (its tokens are refused, its SSH
//! logins removed and its containers stopped; its data stays), enable again (the containers stay
//! stopped until started), and delete with its instances kept (given to the admin) or deleted.

use cohort_proto::api::instances::{DesiredState, InstanceStateChange, StateAction};
use cohort_proto::api::users::{OnDeleteInstances, Role, User as WireUser, UserDeleted};
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course::Course;
use crate::db::models::course_archive::CourseArchive;
use crate::db::models::instance::Instance;
use crate::db::models::user::User;
use crate::error::{ActionError, ActionResult};
use crate::jobs::access::{enqueue_logins, enqueue_revoke};
use crate::jobs::settle::settle_recorded;
use crate::jobs::{enqueue, payload, Step, StepKind};
use crate::views;

/// The account `username`, which must not be the caller's own (an admin cannot lock themself
/// out) and must be found.
/// Refuses (409, at `field`) a change that would leave `user`'s courses without their
/// instructor: deleting the account, or making it a student.
pub(crate) fn refuse_while_teaching(
    conn: &mut PgConnection,
    user: &User,
    field: &str,
) -> ActionResult<()> {
    let taught = Course::codes_taught_by(conn, user.id)?;
    if taught.is_empty() {
        return Ok(());
    }
    Err(ActionError::conflict(
        Some(field),
        format!(
            "{} teaches {}: give those courses to another instructor first",
            user.username,
            taught.join(", ")
        ),
    ))
}

fn other_account(conn: &mut PgConnection, caller: &Caller, username: &str) -> ActionResult<User> {
    if caller.name() == username {
        return Err(ActionError::conflict(
            Some("username"),
            "an admin cannot disable or delete their own account",
        ));
    }
    User::by_username(conn, username)?
        .ok_or_else(|| ActionError::NotFound(format!("user {username}")))
}

/// `?instances=keep|delete` (default `keep`).
pub fn on_instances(value: Option<&str>) -> ActionResult<OnDeleteInstances> {
    match value.unwrap_or("keep") {
        "keep" => Ok(OnDeleteInstances::Keep),
        "delete" => Ok(OnDeleteInstances::Delete),
        other => Err(ActionError::invalid(
            "instances",
            format!("{other:?} is not one of keep, delete"),
        )),
    }
}

/// Disables (`disabled`) or enables an account, and records an `apply_logins` operation for its
/// running instances: logins removed when disabled, its keys (or password) again when enabled.
/// Stopped instances get the same when they next start. The answer waits a while for the
/// operation; a login that could not be changed by then is retried, and the operation fails
/// with the reason if it never is.
pub async fn set_disabled(
    ctl: &Controller,
    caller: Caller,
    username: String,
    disabled: bool,
) -> ActionResult<WireUser> {
    caller.require(Role::Admin)?;
    let admin = caller.clone();
    let user = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let user = other_account(conn, &caller, &username)?;
                let user = User::set_disabled(conn, user.id, disabled)?;
                audit::record(
                    conn,
                    caller.name(),
                    if disabled {
                        AuditAction::Disable
                    } else {
                        AuditAction::Enable
                    },
                    AuditObject::User,
                    &username,
                    json!({}),
                )?;
                let op = enqueue_logins(conn, user.id, &username, Some(caller.user.id))?;
                Ok((user, op.map(|op| op.id)))
            })
        })
        .await?;
    let (user, op) = user;
    settle_recorded(ctl, op).await?;
    if disabled {
        stop_all_of(ctl, &admin, &user).await?;
    }
    Ok(views::user(&user))
}

/// Stops every container `user` owns that is meant to run, each by an operation of its own (a
/// forced stop, retried like any other). Whoever is root in a container could have left a way
/// in that Cohort did not put there (a key of root's, another account): a disabled user's
/// containers do not run until someone starts them again.
async fn stop_all_of(ctl: &Controller, caller: &Caller, user: &User) -> ActionResult<()> {
    let owner = user.id;
    let running: Vec<String> = ctl
        .db(move |conn| {
            Ok(Instance::list(conn, Some(owner))?
                .into_iter()
                .filter(|i| i.desired_state == DesiredState::Running)
                .map(|i| i.name)
                .collect())
        })
        .await?;
    for name in running {
        let stop = InstanceStateChange {
            action: StateAction::Stop,
            force: true,
            timeout_s: None,
        };
        crate::instances::manage::change_state(ctl, caller.clone(), name, stop).await?;
    }
    Ok(())
}

/// Deletes an account. Its instances are either kept, owned from now on by the admin who deleted
/// it (the former owner's login is removed from those running), or deleted by one operation
/// each. An instructor who still teaches a course is refused: give the course to another first.
pub async fn delete(
    ctl: &Controller,
    caller: Caller,
    username: String,
    on_instances: OnDeleteInstances,
) -> ActionResult<UserDeleted> {
    caller.require(Role::Admin)?;
    let admin_id = caller.user.id;
    let (deleted, revoke, archives) = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let user = other_account(conn, &caller, &username)?;
                refuse_while_teaching(conn, &user, "username")?;
                // Their archived homes go with the account: the rows by cascade, the files
                // once this is committed.
                let archives = CourseArchive::of_user(conn, user.id)?;
                let owned = Instance::list(conn, Some(user.id))?;
                Instance::give_all_to(conn, user.id, admin_id)?;
                let mut operations = Vec::new();
                if on_instances == OnDeleteInstances::Delete {
                    // One already being deleted has its operation.
                    for instance in owned
                        .iter()
                        .filter(|i| i.desired_state != DesiredState::Deleted)
                    {
                        Instance::set_desired(conn, instance.id, DesiredState::Deleted)?;
                        let op = enqueue(
                            conn,
                            &payload::Job::DeleteInstance(payload::Delete {
                                former_owner: Some(username.clone()),
                                ..Default::default()
                            }),
                            Some(admin_id),
                            &instance.name,
                            &[Step::new(
                                StepKind::Delete,
                                &instance.name,
                                Some(instance.id),
                            )],
                            None,
                        )?;
                        operations.push(op.id);
                    }
                }
                User::delete(conn, user.id)?;
                let names: Vec<&str> = owned.iter().map(|i| i.name.as_str()).collect();
                audit::record(
                    conn,
                    caller.name(),
                    AuditAction::Delete,
                    AuditObject::User,
                    &username,
                    json!({"instances": on_instances, "names": names, "operations": operations,
                           "archives": archives.len()}),
                )?;
                let kept = match on_instances {
                    OnDeleteInstances::Keep => owned,
                    OnDeleteInstances::Delete => Vec::new(),
                };
                let names = kept.iter().map(|i| i.name.clone()).collect();
                // Kept instances still hold the former owner's login inside: it is taken out
                // of those running (the stopped ones get the new owner's login, and only that,
                // when they next start).
                let revoke = enqueue_revoke(conn, &user.username, kept, Some(admin_id))?;
                Ok((
                    UserDeleted {
                        username: user.username,
                        kept: names,
                        operations,
                    },
                    revoke.map(|op| op.id),
                    archives,
                ))
            })
        })
        .await?;
    crate::courses::archive::remove_files(ctl, &archives);
    settle_recorded(ctl, revoke).await?;
    Ok(deleted)
}
