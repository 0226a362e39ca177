//! lxc's output formats, checked against text captured from the real `lxc list` (lxd-client
//! 5.0.2) for two stopped containers; `tests/tests/serial/cli_format.rs` repeats this against a live lxc.

use cohort_cli::render::{self, Rows};

fn two_stopped() -> Rows {
    let mut rows = Rows::new(["NAME", "STATE", "IPV4", "IPV6", "TYPE", "SNAPSHOTS"]);
    rows.push(["db-2", "STOPPED", "", "", "CONTAINER", "0"]);
    rows.push(["web1", "STOPPED", "", "", "CONTAINER", "0"]);
    rows
}

#[test]
fn table_matches_lxc() {
    let expected = "\
+------+---------+------+------+-----------+-----------+
| NAME |  STATE  | IPV4 | IPV6 |   TYPE    | SNAPSHOTS |
+------+---------+------+------+-----------+-----------+
| db-2 | STOPPED |      |      | CONTAINER | 0         |
+------+---------+------+------+-----------+-----------+
| web1 | STOPPED |      |      | CONTAINER | 0         |
+------+---------+------+------+-----------+-----------+
";
    assert_eq!(render::table(&two_stopped()), expected);
}

#[test]
fn empty_table_is_header_only_like_lxc() {
    let expected = "\
+------+-------+
| NAME | STATE |
+------+-------+
";
    assert_eq!(render::table(&Rows::new(["NAME", "STATE"])), expected);
}

#[test]
fn compact_matches_lxc() {
    let expected = "  NAME   STATE   IPV4  IPV6    TYPE     SNAPSHOTS  \n  db-2  STOPPED              CONTAINER  0          \n  web1  STOPPED              CONTAINER  0          \n";
    assert_eq!(render::compact(&two_stopped()), expected);
}

#[test]
fn csv_matches_lxc() {
    assert_eq!(
        render::csv(&two_stopped()),
        "db-2,STOPPED,,,CONTAINER,0\nweb1,STOPPED,,,CONTAINER,0\n"
    );
}

#[test]
fn csv_quotes_cells_with_commas_and_newlines() {
    let mut rows = Rows::new(["NAME", "IPV4"]);
    rows.push(["c1", "10.0.0.2 (eth0)\n10.0.1.2 (eth1)"]);
    rows.push(["c2", "a,b"]);
    assert_eq!(
        render::csv(&rows),
        "c1,\"10.0.0.2 (eth0)\n10.0.1.2 (eth1)\"\nc2,\"a,b\"\n"
    );
}

#[test]
fn json_is_one_line() {
    let out = render::json(&serde_json::json!([{"name": "c1"}])).unwrap();
    assert_eq!(out, "[{\"name\":\"c1\"}]\n");
}
