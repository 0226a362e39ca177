//! The course page's datasets: what the course holds against its quota, and an upload that
//! streams the chosen file to the same push as `POST /api/v1/courses/{code}/data` with a progress
//! bar. The browser sends the file as the request's body (never a form held in memory on either
//! side), so several GB go through; the session's CSRF token travels in a header, as a form's
//! would in its field. Without JavaScript the section lists the datasets and says to use
//! `cohort course data push`.

use actix_web::{web, HttpRequest, HttpResponse};
use cohort_proto::api::course_data::{DataUsage, PushDatasetQuery};
use futures_util::StreamExt;
use maud::{html, Markup};

use super::i18n::Msg;
use super::session::{same_secret, SignedIn};
use crate::app::state::Controller;
use crate::courses::data::{self, DatasetPush};
use crate::error::ActionError;

/// The header carrying the session's CSRF token with an upload.
pub const CSRF_HEADER: &str = "x-cohort-csrf";

/// The section, for those who may see the course's data (`usage`); nothing for the others.
pub fn section(s: &SignedIn, code: &str, usage: Option<&DataUsage>) -> Markup {
    let lang = s.lang;
    let Some(usage) = usage else {
        return html! {};
    };
    html! {
        h2 { (lang.t(Msg::Datasets)) }
        p #data-quota {
            (lang.t(Msg::DataUsed)) " " (mib(usage.used_bytes)) " / " (usage.quota_mib) " MiB"
        }
        @if !usage.datasets.is_empty() {
            table #datasets {
                thead { tr {
                    th scope="col" { (lang.t(Msg::Name)) }
                    th scope="col" { (lang.t(Msg::Size)) }
                    th scope="col" { (lang.t(Msg::Version)) }
                    th scope="col" { (lang.t(Msg::PushedBy)) }
                } }
                tbody {
                    @for d in &usage.datasets {
                        tr data-dataset=(d.name) {
                            td { code { "/data/" (d.name) } }
                            td { (mib(d.size_bytes)) " MiB" }
                            td { code { (d.sha256.get(..12).unwrap_or(&d.sha256)) } }
                            td { (d.pushed_by.as_deref().unwrap_or("—")) " · " (d.pushed_at.format("%Y-%m-%d %H:%M UTC")) }
                        }
                    }
                }
            }
        }
        form.stacked #dataset-upload method="post" action={ "/courses/" (code) "/data" }
            data-csrf=(s.csrf) data-sending=(lang.t(Msg::Uploading)) data-done=(lang.t(Msg::Uploaded)) {
            label for="dataset-name" { (lang.t(Msg::DatasetName)) }
            input #dataset-name name="name" type="text" required pattern="[A-Za-z0-9][A-Za-z0-9._-]*";
            p.error #dataset-name-error role="alert" hidden {}
            label for="dataset-file" { (lang.t(Msg::DatasetFile)) }
            input #dataset-file name="file" type="file" required accept=".tar,application/x-tar";
            p.error #dataset-body-error role="alert" hidden {}
            progress #dataset-progress max="1" value="0" hidden {}
            p #dataset-status aria-live="polite" {}
            p.error #dataset-form-error role="alert" hidden {}
            button #dataset-upload-button type="submit" { (lang.t(Msg::Upload)) }
            noscript { p { (lang.t(Msg::UploadNeedsScript)) " " code { "cohort course data push " (code) " PATH" } } }
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / f64::from(1 << 20))
}

/// What the page shows for a course: its datasets where the caller may see them (staff and
/// admins), `None` for anyone else.
pub async fn usage_for(ctl: &Controller, s: &SignedIn, code: &str) -> Option<DataUsage> {
    data::list(ctl, s.bearer.clone(), code.to_string())
        .await
        .ok()
}

/// `POST /courses/{code}/data?name=NAME` from the page's script: the body streamed into the
/// push; answered as the API answers (201 and the pushed dataset, or the refusal as JSON naming
/// its field), which the script shows beside the field.
pub async fn upload(
    ctl: web::Data<Controller>,
    s: SignedIn,
    req: HttpRequest,
    code: web::Path<String>,
    query: web::Query<PushDatasetQuery>,
    mut body: web::Payload,
) -> Result<HttpResponse, ActionError> {
    let token = req
        .headers()
        .get(CSRF_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !same_secret(token, &s.csrf) {
        return Err(ActionError::Forbidden(
            "the upload's CSRF token is missing or wrong: reload the page".into(),
        ));
    }
    let mut push =
        DatasetPush::begin(&ctl, &s.caller, code.into_inner(), query.into_inner()).await?;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| ActionError::invalid("body", e.to_string()))?;
        push.write(&chunk)?;
    }
    Ok(HttpResponse::Created().json(push.finish(&ctl, s.caller).await?))
}
