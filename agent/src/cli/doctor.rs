//! `cohort-agent doctor`: the checks as a table; exit code 1 when any FAILs. The table wraps its
//! cells to the terminal's width, or, when the output is not a terminal (a pipe, a log, an ssh
//! session without a pty), to `COLUMNS` where set (as `ls` and `ps` do) and else 80 columns, so
//! it reads in any terminal it is pasted into.

use cohort_agent::doctor::{self, Level};
use cohort_agent::AgentConfig;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, Color, Table};

/// Columns when the output is not a terminal whose width is known and `COLUMNS` is not set.
const WIDTH: u16 = 80;

pub async fn run(config: &AgentConfig) -> anyhow::Result<i32> {
    let checks = doctor::run(config).await;
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
        .set_header(["CHECK", "STATUS", "DETAIL", "FIX"]);
    if table.width().is_none() {
        let columns = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok());
        table.set_width(columns.filter(|c| *c >= 40).unwrap_or(WIDTH));
    }
    for c in &checks {
        let color = match c.level {
            Level::Ok => Color::Green,
            Level::Warn => Color::Yellow,
            Level::Fail => Color::Red,
        };
        table.add_row(vec![
            Cell::new(&c.name),
            Cell::new(c.level.to_string()).fg(color),
            Cell::new(&c.detail),
            Cell::new(&c.fix),
        ]);
    }
    println!("{table}");
    let failed = checks.iter().filter(|c| c.level == Level::Fail).count();
    if failed > 0 {
        eprintln!("Error: {failed} check(s) failed");
        Ok(1)
    } else {
        Ok(0)
    }
}
