//! `cohort user create|list|token|disable|enable|delete`: people and their API tokens (Cohort's
//! own verb).

use clap::{Args, Subcommand, ValueEnum};

use super::TableFormat;

#[derive(Debug, Args)]
pub struct User {
    #[command(subcommand)]
    pub command: UserCommand,
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user
    Create(UserCreate),
    /// List users
    #[command(visible_alias = "ls")]
    List(UserList),
    /// Issue a new API token for a user and print it once; or list or revoke tokens
    Token(UserToken),
    /// Disable a user: their tokens are refused and their SSH logins removed (admin)
    Disable(UserName),
    /// Enable a disabled user again (admin)
    Enable(UserName),
    /// Delete a user, keeping their instances (given to you) or deleting them (admin)
    Delete(UserDelete),
}

#[derive(Debug, Args)]
pub struct UserName {
    /// [<remote>:]<username>
    pub username: String,
}

/// What happens to a deleted user's instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnInstances {
    /// They stay, owned by the admin who deletes the user
    Keep,
    /// They are deleted
    Delete,
}

#[derive(Debug, Args)]
pub struct UserDelete {
    /// [<remote>:]<username>
    pub username: String,
    /// What to do with the user's instances
    #[arg(long, value_enum)]
    pub instances: OnInstances,
    /// Don't ask for confirmation
    #[arg(short, long)]
    pub force: bool,
}

/// A user's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    Admin,
    Instructor,
    Student,
}

#[derive(Debug, Args)]
pub struct UserCreate {
    /// [<remote>:]<username>
    pub username: String,
    /// Role
    #[arg(long, value_enum, default_value = "student")]
    pub role: Role,
    /// Full name
    #[arg(long)]
    pub name: Option<String>,
    /// Email address
    #[arg(long)]
    pub email: Option<String>,
}

#[derive(Debug, Args)]
pub struct UserList {
    /// [<remote>:]
    pub remote: Option<String>,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

/// `cohort user token USER` issues one (as before); `list` and `revoke` manage them.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct UserToken {
    #[command(subcommand)]
    pub command: Option<TokenCommand>,
    #[command(flatten)]
    pub issue: TokenIssue,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Issue a new API token and print it once
    Create(TokenIssue),
    /// List a user's tokens (never their secret)
    #[command(visible_alias = "ls")]
    List(TokenList),
    /// Revoke a token by its id
    Revoke(TokenRevoke),
}

#[derive(Debug, Args)]
pub struct TokenIssue {
    /// [<remote>:]<username>
    #[arg(required = true)]
    pub username: Option<String>,
    /// A label to tell the user's tokens apart, e.g. laptop
    #[arg(long = "name")]
    pub label: Option<String>,
    /// Days until the token expires (default: the controller's, 90)
    #[arg(long)]
    pub expires_in_days: Option<u32>,
}

#[derive(Debug, Args)]
pub struct TokenList {
    /// [<remote>:]<username>
    pub username: String,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

#[derive(Debug, Args)]
pub struct TokenRevoke {
    /// [<remote>:]<username>
    pub username: String,
    /// The token's id (from `cohort user token list`)
    pub id: i64,
}
