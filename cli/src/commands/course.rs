//! `cohort course`: DESIGN.md's course verbs over `/courses`. The roster travels as the raw file
//! (the controller parses and validates it), provision and teardown follow their operation, and
//! the endpoints export is printed exactly as the controller renders it.

use std::io::Read;

use anyhow::{bail, Context};
use cohort_proto::api::courses::{
    CopyCourse, Course as CourseInfo, CreateCourse, IssuedPassword, RosterReport, StudentSnapshot,
    Teardown,
};
use cohort_proto::api::instances::Snapshot;
use cohort_proto::api::operations::Operation;
use reqwest::Method;

use super::{confirm, Session};
use crate::args::course::{
    Course, CourseCommand, CourseCreate, CourseStudent, EndpointFormat, StaffCommand,
    StudentCommand, StudentRemove, StudentTarget,
};
use crate::client::seg;
use crate::render::{self, Rows};
use crate::{progress, units};

/// Runs a course verb; the exit status (0, or [`progress::SOME_QUEUED`] for a provision that
/// left students in the queue).
pub async fn run(session: &Session, args: Course) -> anyhow::Result<i32> {
    match args.command {
        CourseCommand::Provision(provision) => {
            let (client, code) = session.target(&provision.code)?;
            let path = format!("/courses/{}/provision", seg(&code));
            let operation: Operation = client.post(&path, &serde_json::json!({})).await?;
            if !provision.wait.resolve(false) {
                println!("{}", operation.id);
                return Ok(0);
            }
            progress::wait_placed(&client, &operation).await
        }
        other => run_other(session, other).await.map(|()| 0),
    }
}

async fn run_other(session: &Session, command: CourseCommand) -> anyhow::Result<()> {
    match command {
        CourseCommand::Create(create) => {
            let (client, code) = session.target(&create.code)?;
            let request = create_request(code, *create)?;
            let _: CourseInfo = client.post("/courses", &request).await?;
            Ok(())
        }
        CourseCommand::List(list) => {
            let client = session.remote_only(list.remote.as_deref())?;
            let mut courses: Vec<CourseInfo> = client.get("/courses").await?;
            courses.sort_by(|a, b| a.code.cmp(&b.code));
            let mut rows = Rows::new(["CODE", "TITLE", "INSTRUCTOR", "IMAGE", "STATE", "STUDENTS"]);
            for course in &courses {
                rows.push([
                    course.code.clone(),
                    course.title.clone(),
                    course.instructor.clone(),
                    course.image.clone().unwrap_or_default(),
                    course.state.as_str().to_uppercase(),
                    course.students.to_string(),
                ]);
            }
            render::print(list.format, &rows, &courses)
        }
        CourseCommand::Set(set) => super::course_network::set(session, set).await,
        CourseCommand::Grant(grant) => super::course_budget::grant(session, grant).await,
        CourseCommand::Limits(limits) => super::course_limits::set(session, limits).await,
        CourseCommand::Show(show) => {
            let (client, code) = session.target(&show.code)?;
            let course: CourseInfo = client.get(&format!("/courses/{}", seg(&code))).await?;
            print!("{}", render::yaml(&course)?);
            Ok(())
        }
        CourseCommand::Roster(roster) => {
            let (client, code) = session.target(&roster.code)?;
            let (bytes, kind) = read_roster(&roster.file)?;
            let request = client
                .request(Method::POST, &format!("/courses/{}/roster", seg(&code)))
                .header(reqwest::header::CONTENT_TYPE, kind)
                .body(bytes);
            let report: RosterReport = client.json(request).await?;
            print!("{}", render::yaml(&report)?);
            Ok(())
        }
        CourseCommand::Provision(_) => unreachable!("`run` answers a provision itself"),
        CourseCommand::Endpoints(endpoints) => {
            let (client, code) = session.target(&endpoints.code)?;
            let format = match endpoints.format {
                EndpointFormat::Csv => "csv",
                EndpointFormat::Json => "json",
                EndpointFormat::SshConfig => "ssh-config",
                EndpointFormat::KnownHosts => "known-hosts",
            };
            let path = format!("/courses/{}/endpoints?format={format}", seg(&code));
            let text = client
                .send(client.request(Method::GET, &path))
                .await?
                .text()
                .await?;
            print!("{text}");
            Ok(())
        }
        CourseCommand::Teardown(teardown) => {
            let (client, code) = session.target(&teardown.code)?;
            let what = if teardown.delete { "delete" } else { "stop" };
            let question = format!("This will {what} every container of course {code}. Continue?");
            if !teardown.force && !confirm(&question)? {
                bail!("Teardown aborted");
            }
            let body = Teardown {
                delete: teardown.delete,
                keep_homes: teardown.keep_homes,
                archive: teardown.archive,
            };
            let path = format!("/courses/{}/teardown", seg(&code));
            let operation: Operation = client.post(&path, &body).await?;
            if !teardown.wait.resolve(true) {
                println!("{}", operation.id);
                return Ok(());
            }
            progress::wait(&client, &operation, session.quiet).await?;
            Ok(())
        }
        CourseCommand::Delete(delete) => {
            let (client, code) = session.target(&delete.code)?;
            let question = if delete.delete_archives {
                format!(
                    "This will remove course {code} and its students' archived homes for good. \
                     Continue?"
                )
            } else {
                format!("This will remove course {code} for good. Continue?")
            };
            if !delete.force && !confirm(&question)? {
                bail!("Delete aborted");
            }
            let mut path = format!("/courses/{}", seg(&code));
            if delete.delete_archives {
                path.push_str("?archives=delete");
            }
            client.call(client.request(Method::DELETE, &path)).await
        }
        CourseCommand::Student(student) => run_student(session, student).await,
        CourseCommand::Data(data) => super::course_data::run(session, data).await,
        CourseCommand::Archive(archive) => super::course_archive::run(session, archive).await,
        CourseCommand::Staff(staff) => {
            let (method, target) = match staff.command {
                StaffCommand::Add(t) => (Method::PUT, t),
                StaffCommand::Rm(t) => (Method::DELETE, t),
            };
            let (client, code) = session.target(&target.code)?;
            let path = format!("/courses/{}/staff/{}", seg(&code), seg(&target.username));
            let course: CourseInfo = client.json(client.request(method, &path)).await?;
            println!("{}", course.staff.join("\n"));
            Ok(())
        }
        CourseCommand::Copy(copy) => {
            let (client, code) = session.target(&copy.old)?;
            let body = CopyCourse {
                code: copy.new,
                title: copy.title,
            };
            let path = format!("/courses/{}/copy", seg(&code));
            let course: CourseInfo = client.post(&path, &body).await?;
            println!("{}", course.code);
            Ok(())
        }
    }
}

/// Unenrols a student; their container goes, their home only with `--delete-home`.
async fn remove_student(session: &Session, args: StudentRemove) -> anyhow::Result<()> {
    let (client, code) = session.target(&args.code)?;
    let question = format!(
        "This will delete {}'s home volume in course {code} for good. Continue?",
        args.username
    );
    if args.delete_home && !args.force && !confirm(&question)? {
        bail!("Remove aborted");
    }
    let path = format!(
        "/courses/{}/students/{}?delete_home={}",
        seg(&code),
        seg(&args.username),
        args.delete_home
    );
    let operation: Operation = client.json(client.request(Method::DELETE, &path)).await?;
    if !args.wait.resolve(true) {
        println!("{}", operation.id);
        return Ok(());
    }
    progress::wait(&client, &operation, session.quiet).await?;
    Ok(())
}

async fn student_action(
    session: &Session,
    target: StudentTarget,
    action: &str,
) -> anyhow::Result<()> {
    let (client, code) = session.target(&target.code)?;
    let path = format!(
        "/courses/{}/students/{}/{action}",
        seg(&code),
        seg(&target.username)
    );
    let operation: Operation = client.post(&path, &serde_json::json!({})).await?;
    if !target.wait.resolve(true) {
        println!("{}", operation.id);
        return Ok(());
    }
    progress::wait(&client, &operation, session.quiet).await?;
    Ok(())
}

async fn run_student(session: &Session, args: CourseStudent) -> anyhow::Result<()> {
    match args.command {
        StudentCommand::Start(t) => student_action(session, t, "start").await,
        StudentCommand::Stop(t) => student_action(session, t, "stop").await,
        StudentCommand::Restart(t) => student_action(session, t, "restart").await,
        StudentCommand::Reset(t) => student_action(session, t, "reset").await,
        StudentCommand::Remove(r) => remove_student(session, r).await,
        StudentCommand::Password(account) => {
            let (client, code) = session.target(&account.code)?;
            let path = format!(
                "/courses/{}/students/{}/password",
                seg(&code),
                seg(&account.username)
            );
            let issued: IssuedPassword = client.post(&path, &serde_json::json!({})).await?;
            println!("{}", issued.password);
            Ok(())
        }
        StudentCommand::Snapshot(snap) => {
            let (client, code) = session.target(&snap.code)?;
            let path = format!(
                "/courses/{}/students/{}/snapshots",
                seg(&code),
                seg(&snap.username)
            );
            let made: Snapshot = client
                .post(
                    &path,
                    &StudentSnapshot {
                        name: snap.snapshot,
                    },
                )
                .await?;
            if !session.quiet {
                println!("{}", made.name);
            }
            Ok(())
        }
        StudentCommand::Restore(restore) => {
            let (client, code) = session.target(&restore.code)?;
            let path = format!(
                "/courses/{}/students/{}/snapshots/{}/restore",
                seg(&code),
                seg(&restore.username),
                seg(&restore.snapshot)
            );
            client.call(client.request(Method::POST, &path)).await
        }
        StudentCommand::Snapshots(list) => {
            let (client, code) = session.target(&list.code)?;
            let path = format!(
                "/courses/{}/students/{}/snapshots",
                seg(&code),
                seg(&list.username)
            );
            let snapshots: Vec<Snapshot> = client.get(&path).await?;
            let mut rows = Rows::new(["NAME", "TAKEN AT", "STATEFUL"]);
            for snap in &snapshots {
                rows.push([
                    snap.name.clone(),
                    snap.created_at
                        .map(|t| t.format("%Y/%m/%d %H:%M UTC").to_string())
                        .unwrap_or_default(),
                    if snap.stateful { "YES" } else { "NO" }.to_string(),
                ]);
            }
            render::print(list.format, &rows, &snapshots)
        }
    }
}

fn create_request(code: String, args: CourseCreate) -> anyhow::Result<CreateCourse> {
    let gpu_share = match args.gpu_share.as_deref() {
        None => None,
        Some("exclusive") => Some(1),
        Some(n) => match n.parse::<u32>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                bail!("--gpu-share takes \"exclusive\" or a number of students per GPU, not {n:?}")
            }
        },
    };
    Ok(CreateCourse {
        code,
        title: args.title,
        image: args.image,
        cpu: args.cpu,
        memory_mib: args.memory.as_deref().map(units::mib).transpose()?,
        disk_gib: args.disk.as_deref().map(units::gib).transpose()?,
        gpus: args.gpus,
        gpu_model: args.gpu_model,
        gpu_share,
        processes: args.processes,
        home_mib: args.home_size.as_deref().map(units::mib).transpose()?,
        home_snapshots: args.home_snapshots,
        home_snapshots_keep: args.home_snapshots_keep,
        archive_days: args.archive_days,
        gpu_memory_mib: args.gpu_memory.as_deref().map(units::mib).transpose()?,
        starts: args.starts,
        ends: args.ends,
        instructor: args.instructor,
        idle_gpu_minutes: args.idle_gpu_minutes,
        max_runtime_minutes: args.max_runtime_minutes,
        idle_action: args.idle_action,
        network: super::course_network::policy(&Default::default(), &args.network)?,
        gpu_hours_per_student: super::course_budget::hours_flag(
            args.budget.gpu_hours_per_student.as_deref(),
        )?,
        budget_period: args.budget.budget_period,
        warn_minutes: args.warn_minutes,
    })
}

/// The roster's bytes and content type: JSON when it says so by extension or first character.
fn read_roster(file: &str) -> anyhow::Result<(Vec<u8>, &'static str)> {
    let mut bytes = Vec::new();
    if file == "-" {
        std::io::stdin().read_to_end(&mut bytes)?;
    } else {
        bytes = std::fs::read(file).with_context(|| format!("reading {file}"))?;
    }
    let text = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(&bytes);
    let first = text.iter().find(|b| !b.is_ascii_whitespace());
    let json = file.ends_with(".json") || first == Some(&b'[');
    Ok((bytes, if json { "application/json" } else { "text/csv" }))
}
