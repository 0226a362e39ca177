//! Instance names for a course's students: `<course>-<username>`, folded into LXD's rules
//! (1-63 of a-z 0-9 '-', no '-' at either end, not all digits). When folding or truncation could
//! make two students collide, a short hash of the exact pair keeps names apart, and the same
//! pair always gets the same name.

use sha2::{Digest, Sha256};

const MAX: usize = 63;

/// The LXD instance name for `username` in course `course`.
pub fn instance_name(course: &str, username: &str) -> String {
    let plain = fold(&format!("{course}-{username}"));
    let exact =
        plain.len() == course.len() + 1 + username.len() && plain == format!("{course}-{username}");
    if exact && plain.len() <= MAX && cohort_proto::validate::instance_name(&plain).is_ok() {
        return plain;
    }
    // Folding changed something (e.g. '_' became '-'), so `a_b` and `a-b` would meet: suffix a
    // hash of the original pair.
    let digest = Sha256::digest(format!("{course}\0{username}").as_bytes());
    let suffix = hex::encode(&digest[..4]);
    let room = MAX - suffix.len() - 1;
    let head: String = plain.chars().take(room).collect();
    let head = head.trim_end_matches('-');
    let name = if head.is_empty() {
        format!("c-{suffix}")
    } else {
        format!("{head}-{suffix}")
    };
    debug_assert!(cohort_proto::validate::instance_name(&name).is_ok());
    name
}

/// A name `username` may get in `course` when [`instance_name`] is taken by an instance that is
/// not the course's (made before the course existed): the plain name with 32 random bits,
/// distinct from any name [`instance_name`] gives. Random, so that nobody can take it ahead of
/// the student as they could take the plain one; a provision finds the instance again by its
/// owner, never by recomputing its name.
pub fn instance_name_around(course: &str, username: &str) -> String {
    let suffix = hex::encode(rand::random::<[u8; 4]>());
    let plain = fold(&format!("{course}-{username}"));
    let head: String = plain.chars().take(MAX - suffix.len() - 3).collect();
    let head = head.trim_end_matches('-');
    // `-x-` sets it apart from the hashed names `instance_name` makes (`<head>-<hash>`).
    let name = format!("{head}-x-{suffix}");
    debug_assert!(cohort_proto::validate::instance_name(&name).is_ok());
    name
}

/// Lowercases, maps every other character to '-', squeezes runs of '-' and trims them.
fn fold(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    out.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_proto::validate;

    #[test]
    fn simple_names_stay_readable() {
        assert_eq!(instance_name("demo101", "alice"), "demo101-alice");
        assert_eq!(instance_name("cs-231n", "bob-2"), "cs-231n-bob-2");
    }

    #[test]
    fn folded_names_are_valid_distinct_and_stable() {
        let a = instance_name("cs101", "a_b");
        let b = instance_name("cs101", "a-b");
        assert_ne!(a, b);
        assert_eq!(a, instance_name("cs101", "a_b"));
        assert!(validate::instance_name(&a).is_ok(), "{a}");
        let long = instance_name(&"x".repeat(40), &"y".repeat(32));
        assert!(
            long.len() <= 63 && validate::instance_name(&long).is_ok(),
            "{long}"
        );
        let around = instance_name_around("cs101", "bob");
        assert!(around.starts_with("cs101-bob-x-"), "{around}");
        assert_ne!(
            around,
            instance_name_around("cs101", "bob"),
            "unpredictable"
        );
        assert_ne!(around, instance_name("cs101", "bob"));
        let long = instance_name_around(&"x".repeat(40), &"y".repeat(32));
        assert!(
            long.len() <= 63 && validate::instance_name(&long).is_ok(),
            "{long}"
        );
        let digits = instance_name("123", "_");
        assert!(validate::instance_name(&digits).is_ok(), "{digits}");
    }
}
