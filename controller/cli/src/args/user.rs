//! `cohort user create|list|token`: people and their API tokens (Cohort's own verb).

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
    /// Issue a new API token for a user and print it once
    Token(UserToken),
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

#[derive(Debug, Args)]
pub struct UserToken {
    /// [<remote>:]<username>
    pub username: String,
    /// A label to tell the user's tokens apart, e.g. laptop
    #[arg(long = "name")]
    pub label: Option<String>,
}
