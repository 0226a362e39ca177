//! `cohort`'s table formats against the real `lxc` client: two stopped containers in a test
//! project, listed by lxc as table, compact and csv; cohort's formatter, given the same rows,
//! must print the same text, borders, padding and header included.

use cohort_cli::render::{self, Rows};
use cohort_e2e::TestLxd;

fn lxc_rows(lxd: &TestLxd, columns: &str, header: &[&str]) -> Rows {
    let csv = lxd.lxc(&["list", "--format", "csv", "-c", columns]);
    let mut rows = Rows::new(header.iter().copied());
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(csv.as_bytes());
    for record in reader.records() {
        rows.push(record.expect("lxc's csv").iter().map(str::to_string));
    }
    rows
}

#[test]
fn table_compact_and_csv_match_real_lxc() {
    let lxd = TestLxd::new();
    lxd.lxc_create(&["init", "cohort/base", "web1"]);
    lxd.lxc_create(&["init", "cohort/base", "db-2"]);

    for (columns, header) in [
        ("ns", vec!["NAME", "STATE"]),
        ("nst", vec!["NAME", "STATE", "TYPE"]),
        ("tn", vec!["TYPE", "NAME"]),
    ] {
        let rows = lxc_rows(&lxd, columns, &header);
        assert_eq!(rows.rows.len(), 2, "two containers listed by lxc");
        assert_eq!(
            render::table(&rows),
            lxd.lxc(&["list", "--format", "table", "-c", columns]),
            "table -c {columns}"
        );
        assert_eq!(
            render::compact(&rows),
            lxd.lxc(&["list", "--format", "compact", "-c", columns]),
            "compact -c {columns}"
        );
        assert_eq!(
            render::csv(&rows),
            lxd.lxc(&["list", "--format", "csv", "-c", columns]),
            "csv -c {columns}"
        );
    }
}

#[test]
fn empty_list_matches_real_lxc() {
    let lxd = TestLxd::new();
    let rows = Rows::new(["NAME", "STATE"]);
    assert_eq!(
        render::table(&rows),
        lxd.lxc(&["list", "--format", "table", "-c", "ns"])
    );
    assert_eq!(
        lxd.lxc(&["list", "--format", "csv", "-c", "ns"]),
        render::csv(&rows)
    );
}
