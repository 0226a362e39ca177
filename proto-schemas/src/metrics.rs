//! The Prometheus text exposition format (0.0.4), which `promtool check metrics` and every
//! Prometheus read, from the OpenMetrics text prometheus-client writes: OpenMetrics names a
//! counter family without the `_total` its samples carry, the older format with it, and has no
//! `# EOF`.

/// `open` (OpenMetrics text) as Prometheus text.
pub fn prometheus_text(open: &str) -> String {
    let counters: Vec<&str> = open
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open.len() + 16 * counters.len());
    for line in open.lines() {
        if line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_families_get_their_totals_name_and_eof_goes() {
        let open = "# HELP a_up Up.\n# TYPE a_up gauge\na_up 1\n\
                    # HELP a_shifts Shifts.\n# TYPE a_shifts counter\na_shifts_total 3\n# EOF\n";
        assert_eq!(
            prometheus_text(open),
            "# HELP a_up Up.\n# TYPE a_up gauge\na_up 1\n\
             # HELP a_shifts_total Shifts.\n# TYPE a_shifts_total counter\na_shifts_total 3\n"
        );
    }
}
