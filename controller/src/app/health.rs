//! Whether the controller is healthy (`/healthz`): its database answers, every background loop
//! is alive and ticking (see [`crate::app::loops`]), and how far this host's clock is from the
//! database's (reported, and warned about at start; every comparison uses the database's clock).

use chrono::Utc;
use serde::Serialize;

use crate::app::loops::LoopHealth;
use crate::app::state::Controller;
use crate::db::queries::coordination;
use crate::error::ActionResult;

/// This host's clock against the database's.
#[derive(Debug, Clone, Serialize)]
pub struct ClockSkew {
    /// This host's clock minus the database's, in milliseconds (positive: this host is ahead),
    /// corrected by half the query's round trip.
    pub skew_ms: i64,
    /// Whether it is within `COHORT_MAX_CLOCK_SKEW_S`.
    pub ok: bool,
}

/// What `/healthz` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    /// `ok`, or `unhealthy` when a loop is dead or stale.
    pub status: &'static str,
    pub loops: Vec<LoopHealth>,
    pub clock: ClockSkew,
}

impl Health {
    pub fn healthy(&self) -> bool {
        self.status == "ok"
    }
}

/// The database's clock against this host's; an error when the database does not answer.
pub async fn clock_skew(ctl: &Controller) -> ActionResult<ClockSkew> {
    let sent = Utc::now();
    let db_now = ctl.db(|conn| Ok(coordination::clock(conn)?)).await?;
    let back = Utc::now();
    let here = sent + (back - sent) / 2;
    let skew_ms = (here - db_now).num_milliseconds();
    let limit_ms = ctl.config.server.max_clock_skew_s.saturating_mul(1000) as i64;
    ctl.metrics.clock_skew.set(skew_ms as f64 / 1000.0);
    Ok(ClockSkew {
        skew_ms,
        ok: skew_ms.abs() <= limit_ms,
    })
}

/// The controller's health; an error when the database does not answer.
pub async fn check(ctl: &Controller) -> ActionResult<Health> {
    let clock = clock_skew(ctl).await?;
    let loops = ctl.loops.report();
    let status = if loops.iter().all(|l| l.state == "running") {
        "ok"
    } else {
        "unhealthy"
    };
    Ok(Health {
        status,
        loops,
        clock,
    })
}

/// At start: warns when this host's clock is more than `COHORT_MAX_CLOCK_SKEW_S` from the
/// database's (leases and heartbeats do not depend on it, but logs and audit times read by
/// people do, and a large skew usually means NTP is broken on this host).
pub async fn warn_on_clock_skew(ctl: &Controller) {
    match clock_skew(ctl).await {
        Ok(ClockSkew { ok: true, .. }) => {}
        Ok(ClockSkew { skew_ms, .. }) => tracing::warn!(
            skew_ms,
            max_s = ctl.config.server.max_clock_skew_s,
            "this host's clock is off from the database's by more than COHORT_MAX_CLOCK_SKEW_S; \
             check NTP (Cohort compares times on the database's clock)"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "could not compare this host's clock with the database's")
        }
    }
}
