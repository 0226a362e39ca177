//! The reclaim warning over JupyterLab (issue 43): a student working in JupyterLab never sees
//! the portal's pages, so the relay shows the same banner there. Its HTML pages get one
//! same-origin `<script>` ([`inject`]); the script ([`SCRIPT_PATH`]) asks this origin's
//! [`WARNINGS_PATH`] every half minute, answered by the controller itself with the pass cookie
//! (never relayed to the container, never counted as use), and draws what is pending with
//! `textContent` only. Nothing of the portal crosses: its cookies stay on its host; the banner
//! links to the container's portal page, where Keep working is pressed (a page the container
//! serves, whoever is root in it, cannot press it for the student).

use actix_web::http::header;
use actix_web::HttpResponse;
use serde_json::json;

use crate::http::portal::i18n::{Lang, Msg};

/// The banner's script, on every notebook origin.
pub const SCRIPT_PATH: &str = "/_cohort/banner.js";
/// The pending warnings of this origin's container, for its pass holder.
pub const WARNINGS_PATH: &str = "/_cohort/reclaim-warnings";

/// What an HTML page of JupyterLab gets, before its `</head>`.
const TAG: &str = r#"<script src="/_cohort/banner.js" defer></script>"#;

/// The most bytes of a page the relay holds to put the tag in; a bigger page goes as it is.
pub const MOST_BYTES: usize = 1 << 20;

const SCRIPT: &str = r#"(function () {
  var box = null;
  function show(answer) {
    var ws = answer.warnings;
    if (!ws.length) {
      if (box) { box.remove(); box = null; }
      return;
    }
    if (!box) {
      box = document.createElement('div');
      box.id = 'cohort-reclaim-warning';
      box.setAttribute('role', 'alert');
      box.style.cssText = 'position:fixed;top:0;left:0;right:0;z-index:2147483647;' +
        'background:#fff3cd;color:#1a1a1a;border-bottom:2px solid #b8860b;' +
        'padding:6px 12px;font:14px/1.4 sans-serif';
      document.body.appendChild(box);
    }
    box.textContent = '';
    ws.forEach(function (w) {
      var p = document.createElement('p');
      p.style.margin = '2px 0';
      p.dataset.reason = w.reason;
      p.textContent = w.text + ' ' + w.due + (w.note ? ' (' + w.note + ')' : '');
      box.appendChild(p);
    });
    var a = document.createElement('a');
    a.href = answer.page;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    a.textContent = answer.link;
    box.appendChild(a);
  }
  function ask() {
    fetch('/_cohort/reclaim-warnings', {credentials: 'same-origin', cache: 'no-store'})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (answer) { if (answer) { show(answer); } })
      .catch(function () {});
  }
  ask();
  setInterval(ask, 30000);
})();
"#;

/// `GET /_cohort/banner.js`: the same for every container, so no pass is needed.
pub fn script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header(("x-content-type-options", "nosniff"))
        .body(SCRIPT)
}

/// The answer of [`WARNINGS_PATH`]: each pending warning in the student's language, and the
/// container's portal page.
pub fn answer(
    lang: Lang,
    page: String,
    warnings: &[cohort_proto::api::instances::ReclaimWarning],
) -> HttpResponse {
    let shown: Vec<_> = warnings
        .iter()
        .map(|w| {
            let note = if w.reason == "budget" {
                Some(lang.t(Msg::BudgetCannotWait))
            } else if w.kept_at.is_some() {
                Some(lang.t(Msg::KeptWorking))
            } else {
                None
            };
            json!({
                "reason": w.reason,
                "text": lang.t(crate::http::portal::i18n::reclaim_words(&w.reason, &w.action)),
                "due": w.due_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
                "note": note,
            })
        })
        .collect();
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(json!({"warnings": shown, "page": page, "link": lang.t(Msg::KeepWorking)}))
}

/// `page` with the banner's script tag before its `</head>`; `None` where it has none.
pub fn inject(page: &[u8]) -> Option<Vec<u8>> {
    let at = page
        .windows(7)
        .position(|w| w.eq_ignore_ascii_case(b"</head>"))?;
    let mut out = Vec::with_capacity(page.len() + TAG.len());
    out.extend_from_slice(&page[..at]);
    out.extend_from_slice(TAG.as_bytes());
    out.extend_from_slice(&page[at..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::inject;

    #[test]
    fn the_tag_goes_before_the_head_ends() {
        let page = inject(b"<html><HEAD><title>x</title></HEAD><body></body></html>").unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(
            page.contains(
                r#"<title>x</title><script src="/_cohort/banner.js" defer></script></HEAD>"#
            ),
            "{page}"
        );
        assert_eq!(inject(b"{\"json\": true}"), None);
    }
}
