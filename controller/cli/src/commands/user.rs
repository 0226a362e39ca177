//! `cohort user create|list|token`.

use cohort_proto::api::users::{ApiTokenIssued, CreateApiToken, CreateUser, Role, User};

use super::Session;
use crate::args::user::{Role as RoleArg, User as UserArgs, UserCommand};
use crate::client::seg;
use crate::render::{self, Rows};

pub async fn run(session: &Session, args: UserArgs) -> anyhow::Result<()> {
    match args.command {
        UserCommand::Create(create) => {
            let (client, username) = session.target(&create.username)?;
            let request = CreateUser {
                username,
                role: match create.role {
                    RoleArg::Admin => Role::Admin,
                    RoleArg::Instructor => Role::Instructor,
                    RoleArg::Student => Role::Student,
                },
                full_name: create.name,
                email: create.email,
            };
            let _: User = client.post("/users", &request).await?;
            Ok(())
        }
        UserCommand::List(list) => {
            let client = session.remote_only(list.remote.as_deref())?;
            let mut users: Vec<User> = client.get("/users").await?;
            users.sort_by(|a, b| a.username.cmp(&b.username));
            let mut rows = Rows::new(["USERNAME", "ROLE", "NAME", "EMAIL", "CREATED"]);
            for user in &users {
                rows.push([
                    user.username.clone(),
                    render::wire_name(user.role),
                    user.full_name.clone().unwrap_or_default(),
                    user.email.clone().unwrap_or_default(),
                    user.created_at.format("%Y/%m/%d %H:%M UTC").to_string(),
                ]);
            }
            render::print(list.format, &rows, &users)
        }
        UserCommand::Token(token) => {
            let (client, username) = session.target(&token.username)?;
            let path = format!("/users/{}/tokens", seg(&username));
            let issued: ApiTokenIssued = client
                .post(&path, &CreateApiToken { name: token.label })
                .await?;
            println!("{}", issued.token);
            Ok(())
        }
    }
}
