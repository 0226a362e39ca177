//! `list -c`: lxc's column letters mapped onto what the controller knows about an instance, plus
//! Cohort's own letters. Letters lxc has but the API cannot fill are refused by name rather than
//! shown empty.

use anyhow::bail;
use cohort_proto::api::instances::Instance;

/// One column of `cohort list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Name,
    State,
    Type,
    Created,
    LastUsed,
    Location,
    FingerprintShort,
    FingerprintLong,
    Owner,
    Course,
    Gpus,
    GpuUse,
    Ssh,
}

/// Letters lxc has whose data the controller's API does not carry.
const UNAVAILABLE: &[(char, &str)] = &[
    ('4', "IPv4 address"),
    ('6', "IPv6 address"),
    ('a', "Architecture"),
    ('b', "Storage pool"),
    ('d', "Description"),
    ('D', "disk usage"),
    ('e', "Project name"),
    ('m', "Memory usage"),
    ('M', "Memory usage (%)"),
    ('N', "Number of Processes"),
    ('p', "PID of the instance's init process"),
    ('P', "Profiles"),
    ('S', "Number of snapshots"),
    ('u', "CPU usage (in seconds)"),
];

/// The default layout (lxc's is `ns46tS` plus `L` when clustered).
pub const DEFAULT: &str = "nsLtoCgH";
/// `--fast`: the columns that need nothing but the instance record.
pub const FAST: &str = "nsctL";

impl Column {
    /// Parses lxc's `-c` syntax: shorthand letters, commas between them optional.
    pub fn parse_list(spec: &str) -> anyhow::Result<Vec<Column>> {
        let mut columns = Vec::new();
        for part in spec.split(',') {
            if part.is_empty() {
                bail!("Empty column entry (redundant, leading or trailing command) in '{spec}'");
            }
            if part.contains([':', '.']) {
                bail!("Custom columns ({part:?}) are not supported: the API has no full config");
            }
            for letter in part.chars() {
                columns.push(Column::from_letter(letter, part)?);
            }
        }
        Ok(columns)
    }

    fn from_letter(letter: char, part: &str) -> anyhow::Result<Column> {
        Ok(match letter {
            'n' => Column::Name,
            's' => Column::State,
            't' => Column::Type,
            'c' => Column::Created,
            'l' => Column::LastUsed,
            'L' => Column::Location,
            'f' => Column::FingerprintShort,
            'F' => Column::FingerprintLong,
            'o' => Column::Owner,
            'C' => Column::Course,
            'g' => Column::Gpus,
            'G' => Column::GpuUse,
            'H' => Column::Ssh,
            other => match UNAVAILABLE.iter().find(|(l, _)| *l == other) {
                Some((_, what)) => {
                    bail!("Column '{other}' ({what}) is not available from a Cohort controller")
                }
                None => bail!("Unknown column shorthand char '{other}' in '{part}'"),
            },
        })
    }

    /// The header lxc prints (Cohort's own in the same style).
    pub fn header(self) -> &'static str {
        match self {
            Column::Name => "NAME",
            Column::State => "STATE",
            Column::Type => "TYPE",
            Column::Created => "CREATED AT",
            Column::LastUsed => "LAST USED AT",
            Column::Location => "LOCATION",
            Column::FingerprintShort | Column::FingerprintLong => "BASE IMAGE",
            Column::Owner => "OWNER",
            Column::Course => "COURSE",
            Column::Gpus => "GPUS",
            Column::GpuUse => "GPU USE",
            Column::Ssh => "SSH",
        }
    }

    /// The cell for one instance.
    pub fn cell(self, instance: &Instance) -> String {
        let date = |d: &chrono::DateTime<chrono::Utc>| d.format("%Y/%m/%d %H:%M UTC").to_string();
        match self {
            Column::Name => instance.name.clone(),
            Column::State => crate::render::wire_name(instance.observed_state).to_uppercase(),
            // Cohort makes persistent system containers only.
            Column::Type => "CONTAINER".to_string(),
            Column::Created => date(&instance.created_at),
            Column::LastUsed => instance.last_seen_at.as_ref().map(date).unwrap_or_default(),
            Column::Location => instance.node.clone().unwrap_or_default(),
            Column::FingerprintShort => instance.image.chars().take(12).collect(),
            Column::FingerprintLong => instance.image.clone(),
            Column::Owner => instance.owner.clone(),
            Column::Course => instance.course.clone().unwrap_or_default(),
            Column::Gpus => gpus(instance),
            Column::GpuUse => gpu_use(instance),
            Column::Ssh => match (&instance.ssh_host, instance.ssh_port) {
                (Some(host), Some(port)) => format!("{host}:{port}"),
                _ => String::new(),
            },
        }
    }
}

/// `2x A100` style: count and model(s).
fn gpus(instance: &Instance) -> String {
    if instance.gpus.is_empty() {
        return String::new();
    }
    let mut models: Vec<&str> = instance.gpus.iter().map(|g| g.model.as_str()).collect();
    models.dedup();
    format!("{}x {}", instance.gpus.len(), models.join(", "))
}

/// The instance's GPU use at its node's last poll, one line per GPU it has processes on:
/// `<gpu>: <n> proc, <memory> (<share>%)`; empty when it uses none.
pub fn gpu_use(instance: &Instance) -> String {
    instance
        .gpu_usage
        .iter()
        .map(|u| {
            format!(
                "{}: {} proc, {} ({:.0}%)",
                u.gpu,
                u.processes,
                crate::units::byte_size(u.memory_used_bytes),
                u.memory_share * 100.0
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
