//! Notebook use seen by the proxy, for idle reclaim: each relayed request marks its container
//! as used now, at most once a minute per container so a busy notebook costs no write per
//! request.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use actix_web::web;

use crate::app::state::Controller;

/// Least time between two writes for one container.
const EVERY: Duration = Duration::from_secs(60);

fn last_written() -> &'static Mutex<HashMap<i64, Instant>> {
    static LAST: OnceLock<Mutex<HashMap<i64, Instant>>> = OnceLock::new();
    LAST.get_or_init(Default::default)
}

/// Records that `instance_id`'s notebook was used now (in the background; a failed write is
/// logged, never the browser's problem).
pub fn seen(ctl: &web::Data<Controller>, instance_id: i64) {
    {
        let mut last = last_written().lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if last
            .get(&instance_id)
            .is_some_and(|t| now.duration_since(*t) < EVERY)
        {
            return;
        }
        last.insert(instance_id, now);
    }
    let ctl = ctl.clone();
    actix_web::rt::spawn(async move {
        let written = crate::instances::notebook::note_use(&ctl, instance_id).await;
        if let Err(e) = written {
            tracing::warn!(instance_id, "recording notebook use: {e}");
        }
    });
}
