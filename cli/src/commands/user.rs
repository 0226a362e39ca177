//! `cohort user create|list|token|disable|enable|delete`.

use cohort_proto::api::users::{
    ApiToken, ApiTokenIssued, CreateApiToken, CreateUser, Role, User, UserDeleted,
};
use reqwest::Method;

use super::{confirm, Session};
use crate::args::user::{
    OnInstances, Role as RoleArg, TokenCommand, TokenIssue, User as UserArgs, UserCommand,
};
use crate::client::seg;
use crate::render::{self, Rows};

const TIME: &str = "%Y/%m/%d %H:%M UTC";

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
            let mut rows = Rows::new(["USERNAME", "ROLE", "NAME", "EMAIL", "CREATED", "DISABLED"]);
            for user in &users {
                rows.push([
                    user.username.clone(),
                    render::wire_name(user.role),
                    user.full_name.clone().unwrap_or_default(),
                    user.email.clone().unwrap_or_default(),
                    user.created_at.format(TIME).to_string(),
                    user.disabled_at
                        .map(|t| t.format(TIME).to_string())
                        .unwrap_or_default(),
                ]);
            }
            render::print(list.format, &rows, &users)
        }
        UserCommand::Token(token) => match token.command {
            None | Some(TokenCommand::Create(_)) => {
                let issue = match token.command {
                    Some(TokenCommand::Create(issue)) => issue,
                    _ => token.issue,
                };
                issue_token(session, issue).await
            }
            Some(TokenCommand::List(list)) => {
                let (client, username) = session.target(&list.username)?;
                let tokens: Vec<ApiToken> = client
                    .get(&format!("/users/{}/tokens", seg(&username)))
                    .await?;
                let mut rows = Rows::new(["ID", "NAME", "CREATED", "EXPIRES", "EXPIRED"]);
                for t in &tokens {
                    rows.push([
                        t.id.to_string(),
                        t.name.clone().unwrap_or_default(),
                        t.created_at.format(TIME).to_string(),
                        t.expires_at.format(TIME).to_string(),
                        if t.expired { "YES" } else { "NO" }.to_string(),
                    ]);
                }
                render::print(list.format, &rows, &tokens)
            }
            Some(TokenCommand::Revoke(revoke)) => {
                let (client, username) = session.target(&revoke.username)?;
                let path = format!("/users/{}/tokens/{}", seg(&username), revoke.id);
                client.call(client.request(Method::DELETE, &path)).await
            }
        },
        UserCommand::Disable(user) => set_disabled(session, &user.username, "disable").await,
        UserCommand::Enable(user) => set_disabled(session, &user.username, "enable").await,
        UserCommand::Delete(delete) => {
            let (client, username) = session.target(&delete.username)?;
            let instances = match delete.instances {
                OnInstances::Keep => "keep",
                OnInstances::Delete => "delete",
            };
            let question = format!("Delete user {username} and {instances} their instances?");
            if !delete.force && !confirm(&question)? {
                return Ok(());
            }
            let path = format!("/users/{}?instances={instances}", seg(&username));
            let deleted: UserDeleted = client.json(client.request(Method::DELETE, &path)).await?;
            for name in &deleted.kept {
                println!("Kept instance {name} (now yours)");
            }
            for id in &deleted.operations {
                println!("Deleting instance: operation {id}");
            }
            Ok(())
        }
    }
}

async fn issue_token(session: &Session, issue: TokenIssue) -> anyhow::Result<()> {
    let raw = issue.username.unwrap_or_default();
    let (client, username) = session.target(&raw)?;
    let path = format!("/users/{}/tokens", seg(&username));
    let request = CreateApiToken {
        name: issue.label,
        expires_in_days: issue.expires_in_days,
    };
    let issued: ApiTokenIssued = client.post(&path, &request).await?;
    println!("{}", issued.token);
    Ok(())
}

async fn set_disabled(session: &Session, raw: &str, verb: &str) -> anyhow::Result<()> {
    let (client, username) = session.target(raw)?;
    let path = format!("/users/{}/{verb}", seg(&username));
    client.call(client.request(Method::POST, &path)).await
}
