//! `cohort-agent gpus`: the NVML inventory as a table (MIG devices indented under their GPU) or
//! JSON.

use std::path::PathBuf;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};

use super::Format;

const MIB: u64 = 1024 * 1024;

pub fn run(format: Format, library: Option<PathBuf>) -> anyhow::Result<i32> {
    let inv = cohort_agent::gpu::inventory(library.as_deref());
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&inv)?);
        return Ok(0);
    }
    if let Some(driver) = &inv.driver_version {
        println!("NVIDIA driver {driver}");
    }
    if !inv.gpus.is_empty() {
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED).set_header([
            "INDEX",
            "NAME",
            "UUID",
            "PCI",
            "MEMORY (MiB)",
            "UTIL",
            "MIG",
        ]);
        for g in &inv.gpus {
            table.add_row(vec![
                g.index.to_string(),
                g.name.clone(),
                g.uuid.clone(),
                g.pci_address.clone(),
                format!(
                    "{} / {}",
                    g.memory_used_bytes / MIB,
                    g.memory_total_bytes / MIB
                ),
                g.utilization_percent
                    .map_or("-".into(), |u| format!("{u}%")),
                if g.mig_enabled { "enabled" } else { "-" }.into(),
            ]);
            for m in &g.mig_devices {
                table.add_row(vec![
                    format!("{}/{}", g.index, m.index),
                    format!("  └ {}", m.name),
                    m.uuid.clone(),
                    String::new(),
                    format!("{}", m.memory_total_bytes / MIB),
                    String::new(),
                    "MIG device".into(),
                ]);
            }
        }
        println!("{table}");
    }
    match &inv.unavailable {
        Some(why) if inv.gpus.is_empty() => println!("No GPUs: {why}"),
        Some(why) => println!("Some GPUs could not be read: {why}"),
        None if inv.gpus.is_empty() => println!("No GPUs: NVML reports none"),
        None => {}
    }
    Ok(0)
}
