//! The reclaimer's question list: the running containers it would reclaim for idleness on what
//! it knows now (GPU, JupyterLab, terminals, busy processes), so it asks their nodes what they
//! are doing before it acts (`crate::reclaim::activity`). Terminals and processes count only
//! where the course stops idle containers: a `detach` course takes an idle GPU from a container
//! in use, which keeps running.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};

/// A container to ask about, on node `node_id`.
#[derive(Debug, Clone, QueryableByName)]
pub struct Candidate {
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    #[diesel(sql_type = Text)]
    pub name: String,
    #[diesel(sql_type = BigInt)]
    pub node_id: i64,
}

/// The running, placed containers whose course's `idle_gpu_minutes` (of `minute_s` seconds
/// each), less the warning ahead of them, have passed since their last known use (or their
/// start), GPUs not already detached where the course detaches: those the pass would warn or
/// reclaim, asked first so a warning goes only to a container its node finds unused.
pub fn idle_candidates(conn: &mut PgConnection, minute_s: i64) -> QueryResult<Vec<Candidate>> {
    diesel::sql_query(
        "SELECT i.id, i.name, i.node_id
           FROM instances i
           JOIN instance_usage u ON u.instance_id = i.id
           JOIN course_reclaim r ON r.course_id = i.course_id
           LEFT JOIN instance_activity a ON a.instance_id = i.id
          WHERE i.desired_state = 'running' AND i.observed_state = 'running'
            AND i.node_id IS NOT NULL AND u.running_since IS NOT NULL
            AND r.idle_gpu_minutes IS NOT NULL
            AND NOT (r.idle_action = 'detach' AND u.gpus_detached_at IS NOT NULL)
            AND CASE WHEN r.idle_action = 'stop'
                     THEN GREATEST(u.running_since, u.gpu_active_at, u.gpus_attached_at,
                                   u.notebook_active_at,
                                   a.tty_input_at, a.cpu_busy_at)
                     ELSE GREATEST(u.running_since, u.gpu_active_at, u.gpus_attached_at,
                                   u.notebook_active_at)
                END + make_interval(secs => (r.idle_gpu_minutes
                        - LEAST(GREATEST(r.warn_minutes, 0), r.idle_gpu_minutes / 2))::float8 * $1)
                    <= now()
          ORDER BY i.id",
    )
    .bind::<BigInt, _>(minute_s)
    .load(conn)
}
