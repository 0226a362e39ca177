//! `/api/v1/courses` and the routes under a course.

use actix_web::{web, HttpResponse};
use cohort_proto::api::courses::{
    CopyCourse, CourseHome, CourseJupyter, CourseLimits, CourseQuota, CreateCourse, EndpointsQuery,
    NetworkPolicy, StudentAction, StudentSnapshot, Teardown,
};
use futures_util::StreamExt;
use serde::Deserialize;

use super::extract::{ApiJson, ApiQuery};
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::courses;
use crate::courses::containers;
use crate::courses::course;
use crate::courses::enrol;
use crate::courses::export;
use crate::courses::limits;
use crate::courses::network;
use crate::courses::provision;
use crate::courses::reissue;
use crate::courses::roster::MAX_BYTES;
use crate::error::ActionError;

type Ctl = web::Data<Controller>;
type Reply = Result<HttpResponse, ActionError>;

pub async fn create(ctl: Ctl, caller: Caller, req: ApiJson<CreateCourse>) -> Reply {
    Ok(HttpResponse::Created().json(course::create(&ctl, caller, req.0).await?))
}

pub async fn list(ctl: Ctl, bearer: Bearer) -> Reply {
    Ok(HttpResponse::Ok().json(course::list(&ctl, bearer).await?))
}

pub async fn get(ctl: Ctl, bearer: Bearer, code: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok().json(course::get(&ctl, bearer, code.into_inner()).await?))
}

pub async fn set_quota(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<CourseQuota>,
) -> Reply {
    Ok(HttpResponse::Ok().json(course::set_quota(&ctl, caller, code.into_inner(), req.0).await?))
}

pub async fn set_home(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<CourseHome>,
) -> Reply {
    Ok(HttpResponse::Ok().json(course::set_home(&ctl, caller, code.into_inner(), req.0).await?))
}

pub async fn set_limits(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<CourseLimits>,
) -> Reply {
    Ok(HttpResponse::Ok().json(limits::set(&ctl, caller, code.into_inner(), req.0).await?))
}

pub async fn set_jupyter(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<CourseJupyter>,
) -> Reply {
    Ok(HttpResponse::Ok().json(course::set_jupyter(&ctl, caller, code.into_inner(), req.0).await?))
}

pub async fn set_budget(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<cohort_proto::api::courses::CourseBudget>,
) -> Reply {
    Ok(
        HttpResponse::Ok()
            .json(courses::budget::set(&ctl, caller, code.into_inner(), req.0).await?),
    )
}

pub async fn grant_hours(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<cohort_proto::api::courses::GrantHours>,
) -> Reply {
    Ok(HttpResponse::Ok()
        .json(courses::budget::grant(&ctl, caller, code.into_inner(), req.0).await?))
}

pub async fn set_network(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<NetworkPolicy>,
) -> Reply {
    Ok(HttpResponse::Ok().json(network::set(&ctl, caller, code.into_inner(), req.0).await?))
}

/// The roster travels as the raw file (CSV or JSON); it is read up to the size limit only.
pub async fn import_roster(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    mut body: web::Payload,
) -> Reply {
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| ActionError::invalid("roster", e.to_string()))?;
        bytes.extend_from_slice(&chunk);
        if bytes.len() > MAX_BYTES {
            return Err(ActionError::TooLarge {
                field: "roster".into(),
                limit: MAX_BYTES,
            });
        }
    }
    Ok(HttpResponse::Ok().json(enrol::import(&ctl, caller, code.into_inner(), bytes).await?))
}

pub async fn students(ctl: Ctl, caller: Caller, code: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok().json(course::students(&ctl, caller, code.into_inner()).await?))
}

/// `?delete_home=true|false`, read as text so that anything else is refused at its name.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveStudentQuery {
    delete_home: Option<String>,
}

pub async fn remove_student(
    ctl: Ctl,
    caller: Caller,
    path: web::Path<(String, String)>,
    query: ApiQuery<RemoveStudentQuery>,
) -> Reply {
    let (code, username) = path.into_inner();
    let delete_home = match query.0.delete_home.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ActionError::invalid(
                "delete_home",
                format!("{other:?} is not true or false"),
            ))
        }
    };
    Ok(HttpResponse::Accepted()
        .json(containers::remove_student(&ctl, caller, code, username, delete_home).await?))
}

pub async fn student_action(
    ctl: Ctl,
    caller: Caller,
    path: web::Path<(String, String, String)>,
) -> Reply {
    let (code, username, action) = path.into_inner();
    let action: StudentAction = serde_json::from_value(serde_json::Value::String(action.clone()))
        .map_err(|_| {
        ActionError::invalid(
            "action",
            format!("{action:?} is not one of reset, start, stop, restart"),
        )
    })?;
    Ok(HttpResponse::Accepted()
        .json(containers::student_action(&ctl, caller, code, username, action).await?))
}

pub async fn reissue_password(
    ctl: Ctl,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Reply {
    let (code, username) = path.into_inner();
    Ok(HttpResponse::Created().json(reissue::reissue(&ctl, caller, code, username).await?))
}

pub async fn student_snapshots(
    ctl: Ctl,
    caller: Caller,
    path: web::Path<(String, String)>,
) -> Reply {
    let (code, username) = path.into_inner();
    Ok(HttpResponse::Ok().json(containers::student_snapshots(&ctl, caller, code, username).await?))
}

/// The body is optional: without one the snapshot is named by the time.
pub async fn student_snapshot(
    ctl: Ctl,
    caller: Caller,
    path: web::Path<(String, String)>,
    req: ApiJson<StudentSnapshot>,
) -> Reply {
    let (code, username) = path.into_inner();
    Ok(HttpResponse::Created()
        .json(containers::student_snapshot(&ctl, caller, code, username, req.0).await?))
}

pub async fn student_restore(
    ctl: Ctl,
    caller: Caller,
    path: web::Path<(String, String, String)>,
) -> Reply {
    let (code, username, snapshot) = path.into_inner();
    containers::student_restore(&ctl, caller, code, username, snapshot).await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn provision(ctl: Ctl, caller: Caller, code: web::Path<String>) -> Reply {
    Ok(HttpResponse::Accepted().json(provision::provision(&ctl, caller, code.into_inner()).await?))
}

pub async fn endpoints(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    query: ApiQuery<EndpointsQuery>,
) -> Reply {
    let format = export::Format::parse(query.0.format.as_deref())?;
    let rows = export::list(&ctl, caller, code.into_inner(), format).await?;
    Ok(HttpResponse::Ok()
        .content_type(format.content_type())
        .body(export::render(&rows, format)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    archives: Option<String>,
}

pub async fn delete(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    query: ApiQuery<DeleteQuery>,
) -> Reply {
    let on_archives = courses::delete::on_archives(query.0.archives.as_deref())?;
    courses::delete::delete(&ctl, caller, code.into_inner(), on_archives).await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn teardown(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<Teardown>,
) -> Reply {
    Ok(HttpResponse::Accepted()
        .json(containers::teardown(&ctl, caller, code.into_inner(), req.0).await?))
}

pub async fn add_staff(ctl: Ctl, caller: Caller, path: web::Path<(String, String)>) -> Reply {
    let (code, username) = path.into_inner();
    Ok(HttpResponse::Ok().json(courses::staff::change(&ctl, caller, code, username, true).await?))
}

pub async fn remove_staff(ctl: Ctl, caller: Caller, path: web::Path<(String, String)>) -> Reply {
    let (code, username) = path.into_inner();
    Ok(HttpResponse::Ok().json(courses::staff::change(&ctl, caller, code, username, false).await?))
}

pub async fn copy(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<CopyCourse>,
) -> Reply {
    Ok(HttpResponse::Created()
        .json(courses::copy::copy(&ctl, caller, code.into_inner(), req.0).await?))
}

pub async fn set_home_snapshots(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<cohort_proto::api::courses::CourseHomeSnapshots>,
) -> Reply {
    let change = crate::courses::home_snapshots::set(&ctl, caller, code.into_inner(), req.0);
    Ok(HttpResponse::Ok().json(change.await?))
}

pub async fn set_reclaim_warning(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<cohort_proto::api::courses::CourseReclaimWarning>,
) -> Reply {
    Ok(HttpResponse::Ok()
        .json(course::set_reclaim_warning(&ctl, caller, code.into_inner(), req.0).await?))
}
