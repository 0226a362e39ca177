//! Every migration runs up, down and up again on an empty database, and the schema's invariants
//! hold in the database itself.

use cohort_controller::db::{revert_all, run_migrations, MIGRATIONS};
use cohort_e2e::TestDb;
use diesel::migration::MigrationSource;
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel_migrations::MigrationHarness;

/// Every table of the domain (as `schema.rs` names them, and `inventory_writes`, which only SQL
/// reads: `page_cache`).
const TABLES: [&str; 40] = [
    "api_tokens",
    "audit_log",
    "batch_jobs",
    "course_archives",
    "course_budgets",
    "course_datasets",
    "course_gpu_modes",
    "course_home_snapshots",
    "course_job_limits",
    "course_networks",
    "course_reclaim",
    "course_staff",
    "courses",
    "enrollments",
    "gpu_allocations",
    "gpu_leases",
    "gpu_usage_hours",
    "gpus",
    "images",
    "instance_activity",
    "instance_usage",
    "instances",
    "inventory_writes",
    "join_tokens",
    "kept_homes",
    "lxd_certificates",
    "lxd_trust_tokens",
    "node_certificates",
    "node_images",
    "nodes",
    "notebook_passes",
    "operation_items",
    "operations",
    "orphans",
    "portal_sessions",
    "reclaim_warnings",
    "sign_in_passwords",
    "ssh_keys",
    "student_budgets",
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

/// A GPU's `share_cap` and `allocated`, as the allocation trigger keeps them.
fn cap_of(conn: &mut PgConnection, gpu: i64) -> (Option<i32>, i32) {
    use cohort_controller::db::schema::gpus;
    gpus::table
        .find(gpu)
        .select((gpus::share_cap, gpus::allocated))
        .first(conn)
        .expect("read the GPU's counters")
}

#[test]
fn a_gpus_share_cap_is_the_lowest_n_of_the_containers_on_it_through_every_change() {
    let db = TestDb::new();
    let mut conn = db.connect();
    diesel::connection::SimpleConnection::batch_execute(
        &mut conn,
        "INSERT INTO users (id, username, role) VALUES (1, 'alice', 'student');
         INSERT INTO images (id, fingerprint, alias, size_bytes) VALUES (1, 'f', 'base', 1);
         INSERT INTO nodes (id, name, agent_url, ssh_host, ssh_port_first, ssh_port_last)
           VALUES (1, 'n1', 'https://x', 'h', 20000, 20010);
         INSERT INTO gpus (id, node_id, uuid, idx, model, memory_bytes, pci_address, share_limit)
           VALUES (1, 1, 'GPU-1', 0, 'A100', 1, 'p', 8), (2, 1, 'GPU-2', 1, 'A100', 1, 'q', 8);
         INSERT INTO instances (id, name, owner_id, image_id, node_id, ssh_port, cpu, memory_mib,
                                disk_gib)
           SELECT n, 'i' || n, 1, 1, 1, 20000 + n, 1, 1, 1 FROM generate_series(1, 4) AS n",
    )
    .unwrap();
    let allocate = |conn: &mut PgConnection, gpu: i64, slot: i32, instance: i64, n: &str| {
        exec(
            conn,
            &format!(
                "INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id, share_count)
                 VALUES ({gpu}, 8, {slot}, {instance}, {n})"
            ),
        )
        .unwrap();
    };
    assert_eq!(cap_of(&mut conn, 1), (None, 0));
    // No N of its own: no cap. Then 4, then 3: the lowest.
    allocate(&mut conn, 1, 0, 1, "NULL");
    assert_eq!(cap_of(&mut conn, 1), (None, 1));
    allocate(&mut conn, 1, 1, 2, "4");
    allocate(&mut conn, 1, 2, 3, "3");
    assert_eq!(cap_of(&mut conn, 1), (Some(3), 3));
    allocate(&mut conn, 1, 3, 4, "5");
    assert_eq!(cap_of(&mut conn, 1), (Some(3), 4));
    // The 3 goes (its instance deleted, which takes its slot): the next lowest.
    exec(&mut conn, "DELETE FROM instances WHERE id = 3").unwrap();
    assert_eq!(cap_of(&mut conn, 1), (Some(4), 3));
    // The 4 moves to the other GPU: both caps follow, and both counts.
    exec(
        &mut conn,
        "UPDATE gpu_allocations SET gpu_id = 2 WHERE instance_id = 2",
    )
    .unwrap();
    assert_eq!(cap_of(&mut conn, 1), (Some(5), 2));
    assert_eq!(cap_of(&mut conn, 2), (Some(4), 1));
    // An N changed in place.
    exec(
        &mut conn,
        "UPDATE gpu_allocations SET share_count = 4 WHERE instance_id = 4",
    )
    .unwrap();
    assert_eq!(cap_of(&mut conn, 1), (Some(4), 2));
    // The last capped one goes: uncapped again.
    exec(
        &mut conn,
        "DELETE FROM gpu_allocations WHERE instance_id = 4",
    )
    .unwrap();
    assert_eq!(cap_of(&mut conn, 1), (None, 1));
    // What the counter says is what the allocations say, on every GPU.
    let wrong: i64 = diesel::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(
        "(SELECT count(*) FROM gpus g WHERE g.share_cap IS DISTINCT FROM
            (SELECT min(a.share_count) FROM gpu_allocations a WHERE a.gpu_id = g.id))",
    ))
    .get_result(&mut conn)
    .unwrap();
    assert_eq!(wrong, 0);
}

#[derive(QueryableByName, Debug, PartialEq, Eq)]
struct Counts {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    users: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    nodes: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    instances: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    allocations: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    enrollments: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    items: i64,
}

fn counts(conn: &mut PgConnection) -> Counts {
    diesel::sql_query(
        "SELECT (SELECT count(*) FROM users) AS users, (SELECT count(*) FROM nodes) AS nodes, \
                (SELECT count(*) FROM instances) AS instances, \
                (SELECT count(*) FROM gpu_allocations) AS allocations, \
                (SELECT count(*) FROM enrollments) AS enrollments, \
                (SELECT count(*) FROM operation_items) AS items",
    )
    .get_result(conn)
    .expect("count rows")
}

/// A lab a few terms in: 3,000 students with a container each over 100 nodes (one in four with
/// a GPU slot), 30 courses, a provisioning operation per course with an item per student, and
/// an audit trail.
fn populate(conn: &mut PgConnection) {
    use diesel::connection::SimpleConnection;
    conn.batch_execute(
        "INSERT INTO users (username, role) SELECT 'u' || n, 'student'
           FROM generate_series(1, 3000) AS n;
         INSERT INTO users (username, role) SELECT 'prof' || n, 'instructor'
           FROM generate_series(1, 30) AS n;
         INSERT INTO images (fingerprint, alias, description, gpu_ready, size_bytes)
           VALUES (repeat('c', 64), 'lab/base', 'lab', true, 1);
         INSERT INTO nodes (name, agent_url, ssh_host, ssh_port_first, ssh_port_last, state,
                            cores, memory_bytes, disk_total_bytes, disk_free_bytes, nvidia_runtime)
           SELECT 'gpu-' || n, 'https://127.0.0.1:1', '127.0.0.1', 20000, 21000, 'online',
                  64, 549755813888, 10995116277760, 10995116277760, true
           FROM generate_series(1, 100) AS n;
         INSERT INTO gpus (node_id, uuid, idx, model, memory_bytes, pci_address, share_limit,
                           present)
           SELECT nodes.id, 'GPU-' || nodes.id || '-' || g, g, 'NVIDIA A100', 42949672960,
                  '0000:0' || g || ':00.0', 4, true
           FROM nodes, generate_series(0, 7) AS g;
         INSERT INTO courses (code, title, instructor_id, image_id, cpu, memory_mib, disk_gib,
                              gpus, gpu_share, state)
           SELECT 'c' || n, 'Course ' || n, (SELECT id FROM users WHERE username = 'prof' || n),
                  (SELECT id FROM images LIMIT 1), 2, 4096, 20, 1, 'shared', 'active'
           FROM generate_series(1, 30) AS n;
         INSERT INTO enrollments (course_id, user_id)
           SELECT (SELECT id FROM courses WHERE code = 'c' || (1 + u.id % 30)), u.id
           FROM users u WHERE u.role = 'student';
         INSERT INTO instances (name, owner_id, image_id, node_id, ssh_port, desired_state,
                                observed_state, cpu, memory_mib, disk_gib, gpu_count,
                                gpu_share, strategy, priority, config)
           SELECT 'inst-' || u.id, u.id, (SELECT id FROM images LIMIT 1),
                  (SELECT id FROM nodes ORDER BY id OFFSET (u.id % 100) LIMIT 1),
                  20000 + u.id / 100, 'running', 'running', 2, 4096, 20,
                  CASE WHEN u.id % 4 = 0 THEN 1 ELSE 0 END, 'shared', 'spread', 0, '{}'
           FROM users u WHERE u.role = 'student';
         INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id)
           SELECT g.id, g.share_limit, ((i.ssh_port - 20000) / 8) % 4, i.id
           FROM instances i JOIN gpus g
             ON g.node_id = i.node_id AND g.idx = (i.ssh_port - 20000) % 8
           WHERE i.gpu_count = 1
           ON CONFLICT DO NOTHING;
         INSERT INTO operations (id, kind, status, target, payload)
           SELECT gen_random_uuid(), 'provision_course', 'success', code, '{}' FROM courses;
         INSERT INTO operation_items (id, operation_id, position, action, target, instance_id,
                                      status, attempts)
           SELECT gen_random_uuid(), o.id, row_number() OVER (PARTITION BY o.id), 'create',
                  i.name, i.id, 'success', 1
           FROM operations o JOIN courses c ON c.code = o.target
             JOIN enrollments e ON e.course_id = c.id JOIN instances i ON i.owner_id = e.user_id;
         INSERT INTO audit_log (actor, action, object_kind, object, detail)
           SELECT 'admin', 'create_instance', 'instance', name, '{}' FROM instances;",
    )
    .expect("populate the inventory");
}

#[test]
fn every_migration_goes_down_and_up_again_on_a_populated_database() {
    let db = TestDb::new();
    let mut conn = db.connect();
    populate(&mut conn);
    let populated = counts(&mut conn);
    assert_eq!(populated.instances, 3000);
    assert!(populated.allocations > 500, "{populated:?}");
    assert_eq!(populated.items, 3000);

    // The newest migrations, as an upgrade that is rolled back and done again: every row stays.
    let newest: Vec<String> = (0..3)
        .map(|_| {
            conn.revert_last_migration(MIGRATIONS)
                .unwrap_or_else(|e| {
                    panic!("a newest migration's down on a populated database: {e}")
                })
                .to_string()
        })
        .collect();
    let mut again = run_migrations(&mut conn).expect("up again");
    again.reverse();
    assert_eq!(again, newest);
    assert_eq!(
        counts(&mut conn),
        populated,
        "a down and up lost or made rows"
    );

    // Every down runs on the populated database, one migration at a time, then every up.
    let total = MigrationSource::<Pg>::migrations(&MIGRATIONS)
        .expect("the embedded migrations")
        .len();
    for n in 0..total {
        conn.revert_last_migration(MIGRATIONS).unwrap_or_else(|e| {
            panic!(
                "down number {} of {total} on a populated database: {e}",
                n + 1
            )
        });
    }
    assert!(tables(&mut conn).is_empty(), "down must drop every table");
    assert_eq!(run_migrations(&mut conn).expect("up").len(), total);
    assert_eq!(tables(&mut conn), TABLES);
}
