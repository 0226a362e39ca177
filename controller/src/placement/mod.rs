//! Placement: filter the nodes that can hold an instance (online, not cordoned, cpu, memory,
//! disk for the root and the home with a tenth of the node's pool left free, GPUs of the model
//! asked for with room under `share_limit` and every holder's course `--gpu-share N`, a free SSH
//! port), score them (spread or pack, holding the image first), then allocate the port and GPU slots on the best
//! one. Runs inside the caller's transaction, so the instance row, its port and its GPU slots
//! commit together; the unique indexes are the last guard.
//!
//! Beside it: the SQL functions it calls (`controller/src/db/queries/placement.sql`, called from
//! [`crate::db::queries::placement`]), whether any node could ever hold a
//! request ([`feasible`]), why a queued instance waits ([`queue_reason`]), the queue that places
//! them later ([`queue`]), whether a move's target has room ([`move_room`]), GPU slots given back
//! and taken again ([`gpu_slots`]), and the sizes a placed container gets from its course: its
//! home volume ([`home_size`]) and its process limit ([`process_limit`]).

pub mod data_room;
pub mod feasible;
pub mod gpu_slots;
pub mod home_size;
pub mod move_room;
pub mod process_limit;
pub mod queue;
pub mod queue_reason;

use cohort_proto::api::instances::{GpuShare, PlacementStrategy};
use diesel::prelude::*;

use crate::app::config::PlacementConfig;
use crate::db::models::instance::{Instance, NewInstance};
use crate::db::models::kept_home::KeptHome;
use crate::db::queries::placement::{self, Ask, Try};

/// Where an instance went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub instance_id: i64,
    pub node_id: i64,
    pub node_name: String,
    pub ssh_port: i32,
    /// (gpu id, slot) pairs.
    pub gpu_slots: Vec<(i64, i32)>,
    /// The pass that found the node: how hard the search was.
    pub pass: Pass,
}

/// The window a first pass ranks: this many of the least loaded nodes (most loaded, to pack),
/// and as many of those holding the image, read from an index. Wide enough that concurrent
/// placements, each skipping the nodes the others hold, still find one; 32 placed about 10%
/// more a second than 64 in benchmark 2, and 16 no more than 32.
const WINDOW: i64 = 32;

/// Nodes one pass may find unable to take the instance once locked (the GPU test ran on a
/// snapshot) before the next pass.
const TRIES_PER_PASS: usize = 4;

/// How hard a pass looks for a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// The best of the window that no other transaction holds.
    Window,
    /// The best of every node that no other transaction holds.
    Everything,
    /// The best of every node, waiting for its lock.
    Wait,
}

impl Pass {
    /// The pass `cohort_place_class` numbers `n` (0, 1, 2 in the order above).
    fn from_number(n: i32) -> Pass {
        match n {
            0 => Pass::Window,
            1 => Pass::Everything,
            _ => Pass::Wait,
        }
    }
}

/// Inserts `new`, placed when a node can hold it now (only the node `pinned` names, when set),
/// queued otherwise (the row as given). Returns its id and where it went.
///
/// A placed row is written once, on its node, by the try that placed it, rather than inserted
/// queued and then updated with its node and port.
pub fn insert(
    conn: &mut PgConnection,
    new: &NewInstance<'_>,
    pinned: Option<i64>,
    config: &PlacementConfig,
) -> QueryResult<(i64, Option<Placement>)> {
    let mut ask = Ask::new_row(new)?;
    ask.disk_gib += data_room::data_gib(conn, new.course_id)?;
    let (pinned, home) = home_pin(conn, new.name, pinned)?;
    match place_ask(conn, &ask, pinned, config)? {
        Some(p) => {
            KeptHome::forget(conn, new.name)?;
            Ok((p.instance_id, Some(p)))
        }
        None => {
            let why = queue_reason::why(conn, &ask.need(), config)?;
            let why = waits_for_home(why, home.as_deref());
            Ok((insert_queued(conn, new, &why)?, None))
        }
    }
}

/// What pins a container named `name`: `pinned` when the request names a node, else the node
/// holding its kept home (a teardown that kept homes, a student removed without
/// `--delete-home`), so the student gets their files back rather than a new, empty home on
/// another node. Returns the pin and, when the home made it, that node's name.
fn home_pin(
    conn: &mut PgConnection,
    name: &str,
    pinned: Option<i64>,
) -> QueryResult<(Option<i64>, Option<String>)> {
    if pinned.is_some() {
        return Ok((pinned, None));
    }
    Ok(match KeptHome::node_of(conn, name)? {
        Some((id, node)) => (Some(id), Some(node)),
        None => (None, None),
    })
}

/// A queued container's reason, saying where its kept home pins it.
fn waits_for_home(why: String, home: Option<&str>) -> String {
    match home {
        Some(node) => format!("{why}; its kept home is on node {node}, where it waits for room"),
        None => why,
    }
}

/// Writes `new` queued, with why no node can hold it now.
fn insert_queued(conn: &mut PgConnection, new: &NewInstance<'_>, why: &str) -> QueryResult<i64> {
    let id = Instance::insert(conn, new)?.id;
    Instance::set_error(conn, id, Some(why))?;
    Ok(id)
}

/// Inserts a class: `news`, which ask for the same shape (a course's students), each placed when
/// a node can hold it now and queued otherwise, as [`insert`] would one by one. The placements
/// are one statement (`cohort_place_class`: to spread, it claims as many of the best nodes as
/// there are rows at once and gives each row the best of them that still fits; a row none can
/// take gets the passes and tries of one instance), so the nodes the class holds are held only
/// while it is placed, not for a round trip per student, and the window is ranked once a class
/// rather than once a student. Rows of different shapes are inserted one by one. Returns each
/// row's id and where it went, in the order given.
pub fn insert_class(
    conn: &mut PgConnection,
    news: &[NewInstance<'_>],
    config: &PlacementConfig,
) -> QueryResult<Vec<(i64, Option<Placement>)>> {
    let Some(first) = news.first() else {
        return Ok(Vec::new());
    };
    let mut ask = Ask::new_row(first)?;
    let names: Vec<&str> = news.iter().map(|n| n.name).collect();
    // A kept home pins its student to a node: those classes are placed one by one.
    if KeptHome::any_of(conn, &names)?
        || news
            .iter()
            .any(|new| !ask.same_shape(&Ask::of(new, None)) || new.course_id != first.course_id)
    {
        return news
            .iter()
            .map(|new| insert(conn, new, None, config))
            .collect();
    }
    ask.disk_gib += data_room::data_gib(conn, first.course_id)?;
    let rows = news
        .iter()
        .map(|new| {
            serde_json::to_value(new)
                .map_err(|e| diesel::result::Error::SerializationError(Box::new(e)))
        })
        .collect::<QueryResult<Vec<_>>>()?;
    let tries = placement::place_class(conn, &rows, &ask, config, WINDOW, TRIES_PER_PASS as i32)?;
    if tries.len() != news.len() {
        return Err(diesel::result::Error::DeserializationError(
            format!("{} rows placed for a class of {}", tries.len(), news.len()).into(),
        ));
    }
    // Every row asks for the same, so one that no node can hold has the same reason as the next.
    let mut why: Option<String> = None;
    news.iter()
        .zip(tries)
        .map(|(new, t)| {
            let pass = t.placed_pass.map(Pass::from_number);
            match pass.and_then(|pass| t.placed.placement(pass)) {
                Some(p) => Ok((p.instance_id, Some(p))),
                None => {
                    let why = match &why {
                        Some(why) => why,
                        None => why.insert(queue_reason::why(conn, &ask.need(), config)?),
                    };
                    Ok((insert_queued(conn, new, why)?, None))
                }
            }
        })
        .collect()
}

/// Tries to place the queued `instance`; `None` when no node can hold it now. Only the node
/// `pinned` names is considered when it is set.
pub fn place(
    conn: &mut PgConnection,
    instance: &Instance,
    pinned: Option<i64>,
    config: &PlacementConfig,
) -> QueryResult<Option<Placement>> {
    let ask = Ask {
        instance: Some(instance.id),
        row: None,
        gpu_count: instance.gpu_count,
        cpu: instance.cpu,
        memory_mib: instance.memory_mib,
        disk_gib: instance.disk_gib
            + i64::from(instance.home_gib)
            + data_room::data_gib(conn, instance.course_id)?,
        gpu_model: instance.gpu_model.as_deref(),
        exclusive: instance.gpu_share == GpuShare::Exclusive,
        share: instance.gpu_share_count,
        image_id: instance.image_id,
        pack: instance.strategy == PlacementStrategy::Pack,
    };
    let (pinned, home) = home_pin(conn, &instance.name, pinned)?;
    let placed = place_ask(conn, &ask, pinned, config)?;
    if placed.is_some() {
        KeptHome::forget(conn, &instance.name)?;
    }
    let was_queued = instance
        .error
        .as_deref()
        .is_some_and(|e| e.starts_with(queue_reason::QUEUED));
    if placed.is_some() && was_queued {
        Instance::set_error(conn, instance.id, None)?;
    } else if placed.is_none() {
        // Written only when it changed: every write of `instances` makes the page cache read
        // its pages again.
        let why = queue_reason::why(conn, &ask.need(), config)?;
        let why = waits_for_home(why, home.as_deref());
        if instance.error.as_deref() != Some(why.as_str()) {
            Instance::set_error(conn, instance.id, Some(&why))?;
        }
    }
    Ok(placed)
}

impl<'a> Ask<'a> {
    /// What the new row `new` asks for, the row itself (`row`) not yet attached.
    fn of(new: &NewInstance<'a>, row: Option<serde_json::Value>) -> Self {
        Ask {
            instance: None,
            row,
            gpu_count: new.gpu_count,
            cpu: new.cpu,
            memory_mib: new.memory_mib,
            disk_gib: new.disk_gib + i64::from(new.home_gib),
            gpu_model: new.gpu_model,
            exclusive: new.gpu_share == GpuShare::Exclusive,
            share: new.gpu_share_count,
            image_id: new.image_id,
            pack: new.strategy == PlacementStrategy::Pack,
        }
    }

    /// The new row `new`, with its columns by name.
    fn new_row(new: &NewInstance<'a>) -> QueryResult<Self> {
        let row = serde_json::to_value(new)
            .map_err(|e| diesel::result::Error::SerializationError(Box::new(e)))?;
        Ok(Ask::of(new, Some(row)))
    }

    /// Whether `other` asks for what this does (the rows aside).
    fn same_shape(&self, other: &Ask<'_>) -> bool {
        (
            self.gpu_count,
            self.cpu,
            self.memory_mib,
            self.disk_gib,
            self.gpu_model,
            self.exclusive,
            self.share,
            self.image_id,
            self.pack,
        ) == (
            other.gpu_count,
            other.cpu,
            other.memory_mib,
            other.disk_gib,
            other.gpu_model,
            other.exclusive,
            other.share,
            other.image_id,
            other.pack,
        )
    }

    fn need(&self) -> queue_reason::Need<'_> {
        queue_reason::Need {
            cpu: self.cpu,
            memory_mib: self.memory_mib,
            disk_gib: self.disk_gib,
            gpu_count: self.gpu_count,
            gpu_model: self.gpu_model,
            exclusive: self.exclusive,
            share: self.share,
        }
    }
}

/// Each try is one call of `cohort_place_try` (its current definition, and those of the
/// functions it calls, are in `controller/src/db/queries/placement.sql`): it reads a window of the least
/// loaded nodes from an index (leaving out those earlier tries of the transaction found held by
/// other transactions), filters them on the usage counters the database keeps (see the
/// `placement_counters` migration), ranks them and locks the best one no other placement holds
/// (`FOR UPDATE SKIP LOCKED`), so concurrent placements spread over nodes instead of queueing on
/// the single best one; then `cohort_place_on` takes the port and GPU slots under that lock and
/// writes the instance. A pass
/// that finds nothing in the window looks at every node, and only when every node that fits is
/// held does a pass wait for one. The function runs as one round trip with plans PostgreSQL
/// keeps for the session.
fn place_ask(
    conn: &mut PgConnection,
    ask: &Ask<'_>,
    pinned: Option<i64>,
    config: &PlacementConfig,
) -> QueryResult<Option<Placement>> {
    let mut tried: Vec<i64> = Vec::new();
    for pass in [Pass::Window, Pass::Everything, Pass::Wait] {
        for _ in 0..TRIES_PER_PASS {
            let outcome = try_once(conn, ask, pinned, config, pass, &tried)?;
            let Some(node_id) = outcome.placed_node else {
                break;
            };
            match outcome.placement(pass) {
                Some(placement) => return Ok(Some(placement)),
                // The locked node could not take the instance after all; the function let it go.
                None => tried.push(node_id),
            }
        }
    }
    Ok(None)
}

impl Try {
    /// Where the try placed the instance, found by `pass`; `None` when it did not.
    fn placement(self, pass: Pass) -> Option<Placement> {
        Some(Placement {
            instance_id: self.placed_instance?,
            node_id: self.placed_node?,
            node_name: self.placed_node_name?,
            ssh_port: self.placed_port?,
            gpu_slots: self
                .placed_gpus
                .unwrap_or_default()
                .into_iter()
                .zip(self.placed_slots.unwrap_or_default())
                .collect(),
            pass,
        })
    }
}

/// One try at the best node `pass` looks at, skipping the nodes in `tried`.
fn try_once(
    conn: &mut PgConnection,
    ask: &Ask<'_>,
    pinned: Option<i64>,
    config: &PlacementConfig,
    pass: Pass,
    tried: &[i64],
) -> QueryResult<Try> {
    placement::place_try(
        conn,
        ask,
        pinned,
        config,
        (pass == Pass::Window).then_some(WINDOW),
        pass == Pass::Wait,
        tried,
    )
}
