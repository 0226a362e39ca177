//! Accounts: who a caller is and what they may do. Bearer tokens and the role rules
//! ([`auth`]), failed-authentication throttling ([`auth_failures`]) and auditing
//! ([`failure_audit`]), portal sign-in with a
//! password or against the directory over LDAP ([`sign_in`], [`directory`]), users and SSH keys
//! ([`users`]), the SSH access pushed into containers ([`ssh`]), API tokens ([`tokens`]), roles
//! ([`roles`]) and disabling, enabling and deleting an account ([`disable`]).

pub mod auth;
pub mod auth_failures;
pub mod directory;
pub mod disable;
pub mod failure_audit;
pub mod roles;
pub mod sign_in;
pub mod ssh;
pub mod tokens;
pub mod users;
