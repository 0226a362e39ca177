//! Course names are reserved: an instance named `<code>-...`, for `code` an existing course's
//! code, is made only by that course's provisioning, whoever teaches it or an admin. Otherwise a
//! student could take `<course>-<classmate>` before the course is provisioned and block that
//! classmate (or, before provisioning named around such names, the whole class).

use diesel::prelude::*;

use crate::accounts::auth::Caller;
use crate::db::models::course::Course;
use crate::error::{ActionError, ActionResult};

/// Every code a course would need for `name` to be one of its names: each part of `name` before
/// a '-' (`cs-101-bob` could belong to `cs` or to `cs-101`).
fn owning_codes(name: &str) -> Vec<&str> {
    name.match_indices('-').map(|(i, _)| &name[..i]).collect()
}

/// Refuses `name` to a caller who is neither an admin nor teaches every course whose names it
/// falls under.
pub fn check_instance_name(
    conn: &mut PgConnection,
    caller: &Caller,
    name: &str,
) -> ActionResult<()> {
    if caller.is_admin() {
        return Ok(());
    }
    let codes = owning_codes(name);
    if codes.is_empty() {
        return Ok(());
    }
    let mut not_taught = None;
    for (id, code) in Course::ids_of_codes(conn, &codes)? {
        if !super::course::teaches(conn, caller, id)? {
            not_taught = Some(code);
            break;
        }
    }
    match not_taught {
        Some(code) => Err(ActionError::conflict(
            Some("name"),
            format!("instance names starting with {code}- are reserved for course {code}"),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::owning_codes;

    #[test]
    fn every_prefix_before_a_dash_is_a_possible_course() {
        assert_eq!(owning_codes("cs-101-bob"), ["cs", "cs-101"]);
        assert!(owning_codes("box").is_empty());
    }
}
