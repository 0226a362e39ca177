//! A student's archived homes on their portal page (a download link each while it is kept),
//! and the download itself, through the same action as `/api/v1/courses/{code}/archive/{user}`
//! (which decides who may read which archive).

use actix_web::{web, HttpResponse};
use cohort_proto::api::course_archives::CourseArchive;
use maud::{html, Markup};

use super::error::PortalError;
use super::i18n::{Lang, Msg};
use super::session::SignedIn;
use crate::app::state::Controller;
use crate::courses::archive;
use crate::http::api::course_archives::archive_reply;

/// The list of the caller's archives; nothing when they have none.
pub fn section(lang: Lang, archives: &[CourseArchive]) -> Markup {
    html! {
        @if !archives.is_empty() {
            section #archives {
                h2 { (lang.t(Msg::MyArchives)) }
                p { (lang.t(Msg::ArchivesNote)) }
                ul {
                    @for a in archives {
                        li data-course=(a.course) {
                            a.archive-link href={ "/courses/" (a.course) "/archive/" (a.user) } download
                                data-sha256=(a.sha256) {
                                (a.course) "-" (a.user) ".tar.gz"
                            }
                            " (" (a.size_bytes) " B; " (lang.t(Msg::KeptUntil)) " "
                            time datetime=(a.expires_at.to_rfc3339()) { (a.expires_at.format("%Y-%m-%d")) }
                            ")"
                        }
                    }
                }
            }
        }
    }
}

/// `GET /courses/{code}/archive/{username}`: the archive's file.
pub async fn download(
    ctl: web::Data<Controller>,
    s: SignedIn,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PortalError> {
    let (code, user) = path.into_inner();
    let lang = s.lang;
    let found = archive::download(&ctl, s.caller.clone(), code, user)
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    archive_reply(found)
        .await
        .map_err(|e| PortalError::Action(lang, e))
}
