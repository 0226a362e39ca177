//! Every migration runs up, down and up again on an empty database, and the schema's invariants
//! hold in the database itself.

use cohort_controller::db::{revert_all, run_migrations};
use cohort_e2e::TestDb;
use diesel::prelude::*;

/// Every table of the domain (as `schema.rs` names them, and `inventory_writes`, which only SQL
/// reads: `page_cache`).
const TABLES: [&str; 20] = [
    "api_tokens",
    "audit_log",
    "course_networks",
    "course_reclaim",
    "courses",
    "enrollments",
    "gpu_allocations",
    "gpus",
    "images",
    "instance_usage",
    "instances",
    "inventory_writes",
    "join_tokens",
    "node_certificates",
    "node_images",
    "nodes",
    "operation_items",
    "operations",
    "ssh_keys",
    "users",
];

#[derive(QueryableByName)]
struct Table {
    #[diesel(sql_type = diesel::sql_types::Text)]
    table_name: String,
}

/// The tables of the public schema but diesel's own, by name.
fn tables(conn: &mut PgConnection) -> Vec<String> {
    diesel::sql_query(
        "SELECT table_name::text AS table_name FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_name <> '__diesel_schema_migrations' \
         ORDER BY table_name",
    )
    .load::<Table>(conn)
    .expect("list tables")
    .into_iter()
    .map(|t| t.table_name)
    .collect()
}

#[test]
fn migrations_run_up_down_and_up_again_on_an_empty_database() {
    let db = TestDb::empty();
    let mut conn = db.connect();
    assert!(tables(&mut conn).is_empty());

    let applied = run_migrations(&mut conn).expect("first up");
    assert!(applied.len() >= 11, "applied only {applied:?}");
    assert_eq!(tables(&mut conn), TABLES, "the domain's tables");

    revert_all(&mut conn).expect("down");
    assert!(tables(&mut conn).is_empty(), "down must drop every table");

    let again = run_migrations(&mut conn).expect("second up");
    assert_eq!(again, applied);
    assert_eq!(tables(&mut conn), TABLES);
}

fn exec(conn: &mut PgConnection, sql: &str) -> QueryResult<usize> {
    diesel::sql_query(sql).execute(conn)
}

#[test]
fn the_database_refuses_a_slot_past_share_limit_a_reused_port_and_a_lower_limit_under_use() {
    let db = TestDb::new();
    let mut conn = db.connect();
    exec(
        &mut conn,
        "INSERT INTO users (id, username, role) VALUES (1, 'alice', 'student')",
    )
    .unwrap();
    exec(
        &mut conn,
        "INSERT INTO images (id, fingerprint, alias, size_bytes) VALUES (1, 'f', 'base', 1)",
    )
    .unwrap();
    exec(&mut conn, "INSERT INTO nodes (id, name, agent_url, ssh_host, ssh_port_first, ssh_port_last) VALUES (1, 'n1', 'https://x', 'h', 20000, 20010)").unwrap();
    exec(&mut conn, "INSERT INTO gpus (id, node_id, uuid, idx, model, memory_bytes, pci_address, share_limit) VALUES (1, 1, 'GPU-1', 0, 'A100', 1, 'p', 2)").unwrap();
    for (id, name, port) in [(1, "a", 20000), (2, "b", 20001), (3, "c", 20002)] {
        exec(&mut conn, &format!("INSERT INTO instances (id, name, owner_id, image_id, node_id, ssh_port, cpu, memory_mib, disk_gib) VALUES ({id}, '{name}', 1, 1, 1, {port}, 1, 1, 1)")).unwrap();
    }
    // Same port on the same node.
    let dup_port = exec(&mut conn, "INSERT INTO instances (name, owner_id, image_id, node_id, ssh_port, cpu, memory_mib, disk_gib) VALUES ('d', 1, 1, 1, 20000, 1, 1, 1)");
    assert!(
        dup_port.is_err(),
        "a second instance on (node, port) was accepted"
    );
    // Same name.
    let dup_name = exec(&mut conn, "INSERT INTO instances (name, owner_id, image_id, cpu, memory_mib, disk_gib) VALUES ('a', 1, 1, 1, 1, 1)");
    assert!(
        dup_name.is_err(),
        "a second instance named 'a' was accepted"
    );

    exec(
        &mut conn,
        "INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id) VALUES (1, 2, 0, 1)",
    )
    .unwrap();
    exec(
        &mut conn,
        "INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id) VALUES (1, 2, 1, 2)",
    )
    .unwrap();
    let third = exec(
        &mut conn,
        "INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id) VALUES (1, 2, 2, 3)",
    );
    assert!(
        third.is_err(),
        "slot 2 of a GPU with share_limit 2 was accepted"
    );
    let lying = exec(
        &mut conn,
        "INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id) VALUES (1, 3, 2, 3)",
    );
    assert!(
        lying.is_err(),
        "an allocation claiming another share_limit than the GPU's was accepted"
    );
    let same_slot = exec(
        &mut conn,
        "INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id) VALUES (1, 2, 1, 3)",
    );
    assert!(same_slot.is_err(), "slot 1 was handed out twice");

    let lower = exec(&mut conn, "UPDATE gpus SET share_limit = 1 WHERE id = 1");
    assert!(
        lower.is_err(),
        "share_limit was lowered under a slot in use"
    );
    exec(&mut conn, "UPDATE gpus SET share_limit = 3 WHERE id = 1")
        .expect("raising the limit is fine");
    exec(
        &mut conn,
        "INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id) VALUES (1, 3, 2, 3)",
    )
    .expect("slot 2 fits under 3");
}
