// @generated automatically by Diesel CLI.

diesel::table! {
    api_tokens (id) {
        id -> Int8,
        user_id -> Int8,
        name -> Nullable<Text>,
        token_hash -> Bytea,
        created_at -> Timestamptz,
        last_used_at -> Nullable<Timestamptz>,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    audit_log (id) {
        id -> Int8,
        actor -> Text,
        action -> Text,
        object_kind -> Text,
        object -> Text,
        detail -> Jsonb,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    course_reclaim (course_id) {
        course_id -> Int8,
        idle_gpu_minutes -> Nullable<Int4>,
        idle_action -> Text,
        max_runtime_minutes -> Nullable<Int4>,
        warn_minutes -> Int4,
    }
}

diesel::table! {
    course_home_snapshots (course_id) {
        course_id -> Int8,
        every -> Text,
        keep -> Int4,
    }
}

diesel::table! {
    course_networks (course_id) {
        course_id -> Int8,
        egress -> Text,
        egress_allow -> Array<Text>,
        ssh_from -> Array<Text>,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    course_staff (course_id, user_id) {
        course_id -> Int8,
        user_id -> Int8,
        added_at -> Timestamptz,
    }
}

diesel::table! {
    courses (id) {
        id -> Int8,
        code -> Text,
        title -> Text,
        instructor_id -> Int8,
        image_id -> Nullable<Int8>,
        cpu -> Int4,
        memory_mib -> Int8,
        disk_gib -> Int8,
        gpus -> Int4,
        gpu_model -> Nullable<Text>,
        gpu_share -> Text,
        starts_at -> Nullable<Timestamptz>,
        ends_at -> Nullable<Timestamptz>,
        state -> Text,
        quota_students -> Nullable<Int4>,
        quota_gpus -> Nullable<Int4>,
        quota_memory_mib -> Nullable<Int8>,
        created_at -> Timestamptz,
        gpu_share_count -> Nullable<Int4>,
        processes -> Nullable<Int4>,
        home_mib -> Nullable<Int4>,
        jupyter_instructors -> Bool,
        gpu_memory_mib -> Nullable<Int8>,
        data_quota_mib -> Nullable<Int8>,
        archive_days -> Nullable<Int4>,
    }
}

diesel::table! {
    enrollments (course_id, user_id) {
        course_id -> Int8,
        user_id -> Int8,
        created_at -> Timestamptz,
        initial_password -> Nullable<Text>,
    }
}

diesel::table! {
    gpu_allocations (gpu_id, slot) {
        gpu_id -> Int8,
        share_limit -> Int4,
        slot -> Int4,
        instance_id -> Int8,
        created_at -> Timestamptz,
        share_count -> Nullable<Int4>,
    }
}

diesel::table! {
    gpu_usage_hours (instance_id, hour) {
        instance_id -> Int8,
        hour -> Timestamptz,
        instance_name -> Text,
        course_id -> Nullable<Int8>,
        course_code -> Nullable<Text>,
        owner_id -> Int8,
        username -> Text,
        node_name -> Text,
        allocated_s -> Float8,
        busy_s -> Float8,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    gpus (id) {
        id -> Int8,
        node_id -> Int8,
        uuid -> Text,
        idx -> Int4,
        model -> Text,
        memory_bytes -> Int8,
        pci_address -> Text,
        mig_parent -> Nullable<Text>,
        share_limit -> Int4,
        present -> Bool,
        allocated -> Int4,
        share_cap -> Nullable<Int4>,
    }
}

diesel::table! {
    images (id) {
        id -> Int8,
        fingerprint -> Text,
        alias -> Text,
        description -> Text,
        gpu_ready -> Bool,
        size_bytes -> Int8,
        created_by -> Nullable<Int8>,
        created_at -> Timestamptz,
        jupyter -> Bool,
    }
}

diesel::table! {
    kept_homes (instance_name) {
        instance_name -> Text,
        node_id -> Int8,
        course_id -> Nullable<Int8>,
        kept_at -> Timestamptz,
    }
}

diesel::table! {
    instance_usage (instance_id) {
        instance_id -> Int8,
        gpus -> Jsonb,
        gpu_processes -> Int4,
        gpu_memory_used_bytes -> Int8,
        gpu_active_at -> Nullable<Timestamptz>,
        running_since -> Nullable<Timestamptz>,
        stop_reason -> Nullable<Text>,
        stopped_at -> Nullable<Timestamptz>,
        updated_at -> Timestamptz,
        gpus_detached_at -> Nullable<Timestamptz>,
        detach_reason -> Nullable<Text>,
        notebook_active_at -> Nullable<Timestamptz>,
        gpus_attached_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    instances (id) {
        id -> Int8,
        name -> Text,
        owner_id -> Int8,
        course_id -> Nullable<Int8>,
        image_id -> Int8,
        node_id -> Nullable<Int8>,
        ssh_port -> Nullable<Int4>,
        desired_state -> Text,
        observed_state -> Text,
        cpu -> Int4,
        memory_mib -> Int8,
        disk_gib -> Int8,
        gpu_count -> Int4,
        gpu_model -> Nullable<Text>,
        gpu_share -> Text,
        strategy -> Text,
        priority -> Int4,
        config -> Jsonb,
        error -> Nullable<Text>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        last_seen_at -> Nullable<Timestamptz>,
        ssh_host_key -> Nullable<Text>,
        gpu_share_count -> Nullable<Int4>,
        home_gib -> Int4,
        description -> Nullable<Text>,
    }
}

diesel::table! {
    join_tokens (id) {
        id -> Int8,
        node_name -> Text,
        secret_hash -> Bytea,
        created_by -> Nullable<Int8>,
        expires_at -> Timestamptz,
        used_at -> Nullable<Timestamptz>,
        created_at -> Timestamptz,
        addresses -> Array<Text>,
    }
}

diesel::table! {
    lxd_certificates (id) {
        id -> Int8,
        name -> Text,
        user_id -> Int8,
        fingerprint -> Text,
        certificate -> Text,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    lxd_trust_tokens (id) {
        id -> Int8,
        name -> Text,
        user_id -> Int8,
        secret_hash -> Bytea,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    node_certificates (id) {
        id -> Int8,
        node_name -> Text,
        fingerprint -> Text,
        certificate_pem -> Text,
        not_after -> Timestamptz,
        issued_at -> Timestamptz,
        revoked_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    node_images (node_id, image_id) {
        node_id -> Int8,
        image_id -> Int8,
    }
}

diesel::table! {
    nodes (id) {
        id -> Int8,
        name -> Text,
        agent_url -> Text,
        ssh_host -> Text,
        ssh_port_first -> Int4,
        ssh_port_last -> Int4,
        state -> Text,
        cores -> Int4,
        memory_bytes -> Int8,
        disk_total_bytes -> Int8,
        disk_free_bytes -> Int8,
        lxd_version -> Nullable<Text>,
        storage_driver -> Nullable<Text>,
        nvidia_runtime -> Bool,
        last_heartbeat_at -> Nullable<Timestamptz>,
        enrolled_at -> Timestamptz,
        cpu_used -> Int8,
        memory_used_mib -> Int8,
        disk_used_gib -> Int8,
        instance_count -> Int4,
        state_before_offline -> Nullable<Text>,
        pool_used_bytes -> Int8,
        pool_total_bytes -> Int8,
        daemon -> Nullable<Text>,
    }
}

diesel::table! {
    instance_activity (instance_id) {
        instance_id -> Int8,
        tty_input_at -> Nullable<Timestamptz>,
        cpu_busy_at -> Nullable<Timestamptz>,
        busy_process -> Nullable<Text>,
        checked_at -> Timestamptz,
    }
}

diesel::table! {
    notebook_passes (secret_hash) {
        secret_hash -> Bytea,
        ticket -> Bool,
        session_id -> Int8,
        instance_id -> Int8,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    orphans (node_id, name) {
        node_id -> Int8,
        name -> Text,
        status -> Text,
        ssh_port -> Nullable<Int4>,
        reported -> Bool,
        first_seen_at -> Timestamptz,
        last_seen_at -> Timestamptz,
    }
}

diesel::table! {
    operation_items (id) {
        id -> Uuid,
        operation_id -> Uuid,
        position -> Int4,
        action -> Text,
        target -> Text,
        instance_id -> Nullable<Int8>,
        node_name -> Nullable<Text>,
        ssh_port -> Nullable<Int4>,
        status -> Text,
        attempts -> Int4,
        error -> Nullable<Text>,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    operations (id) {
        id -> Uuid,
        kind -> Text,
        status -> Text,
        created_by -> Nullable<Int8>,
        target -> Text,
        payload -> Jsonb,
        error -> Nullable<Text>,
        claimed_by -> Nullable<Text>,
        lease_until -> Nullable<Timestamptz>,
        run_after -> Timestamptz,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        finished_at -> Nullable<Timestamptz>,
        claim_token -> Nullable<Uuid>,
    }
}

diesel::table! {
    portal_sessions (id) {
        id -> Int8,
        secret_hash -> Bytea,
        user_id -> Int8,
        csrf_token -> Text,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
    }
}

diesel::table! {
    sign_in_passwords (user_id) {
        user_id -> Int8,
        hash -> Text,
        changed_at -> Timestamptz,
    }
}

diesel::table! {
    ssh_keys (id) {
        id -> Int8,
        user_id -> Int8,
        public_key -> Text,
        fingerprint -> Text,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    users (id) {
        id -> Int8,
        username -> Text,
        role -> Text,
        full_name -> Nullable<Text>,
        email -> Nullable<Text>,
        password_hash -> Nullable<Text>,
        created_at -> Timestamptz,
        disabled_at -> Nullable<Timestamptz>,
        roster_course_id -> Nullable<Int8>,
        own_credentials_at -> Nullable<Timestamptz>,
    }
}

diesel::joinable!(api_tokens -> users (user_id));
diesel::table! {
    course_datasets (id) {
        id -> Int8,
        course_id -> Int8,
        name -> Text,
        sha256 -> Text,
        size_bytes -> Int8,
        pushed_by -> Nullable<Int8>,
        pushed_at -> Timestamptz,
    }
}

diesel::joinable!(course_home_snapshots -> courses (course_id));
diesel::joinable!(course_networks -> courses (course_id));
diesel::joinable!(course_reclaim -> courses (course_id));
diesel::joinable!(course_datasets -> courses (course_id));
diesel::joinable!(kept_homes -> nodes (node_id));
diesel::joinable!(course_staff -> courses (course_id));
diesel::joinable!(course_staff -> users (user_id));
diesel::joinable!(courses -> images (image_id));
diesel::joinable!(courses -> users (instructor_id));
diesel::joinable!(enrollments -> courses (course_id));
diesel::joinable!(enrollments -> users (user_id));
diesel::joinable!(gpu_allocations -> instances (instance_id));
diesel::joinable!(gpus -> nodes (node_id));
diesel::joinable!(images -> users (created_by));
diesel::joinable!(instance_usage -> instances (instance_id));
diesel::joinable!(instance_activity -> instances (instance_id));
diesel::joinable!(instances -> courses (course_id));
diesel::joinable!(instances -> images (image_id));
diesel::joinable!(instances -> nodes (node_id));
diesel::joinable!(instances -> users (owner_id));
diesel::joinable!(join_tokens -> users (created_by));
diesel::joinable!(lxd_certificates -> users (user_id));
diesel::joinable!(lxd_trust_tokens -> users (user_id));
diesel::joinable!(node_images -> images (image_id));
diesel::joinable!(node_images -> nodes (node_id));
diesel::joinable!(operation_items -> instances (instance_id));
diesel::joinable!(operation_items -> operations (operation_id));
diesel::joinable!(operations -> users (created_by));
diesel::joinable!(notebook_passes -> instances (instance_id));
diesel::joinable!(notebook_passes -> portal_sessions (session_id));
diesel::joinable!(orphans -> nodes (node_id));
diesel::joinable!(portal_sessions -> users (user_id));
diesel::joinable!(sign_in_passwords -> users (user_id));
diesel::joinable!(ssh_keys -> users (user_id));

diesel::table! {
    course_budgets (course_id) {
        course_id -> Int8,
        gpu_hours_per_student -> Float8,
        budget_period -> Text,
    }
}

diesel::table! {
    student_budgets (course_id, user_id, period_start) {
        course_id -> Int8,
        user_id -> Int8,
        period_start -> Timestamptz,
        granted_hours -> Float8,
        warned_at -> Nullable<Timestamptz>,
        warned_limit_hours -> Nullable<Float8>,
    }
}

diesel::allow_tables_to_appear_in_same_query!(
    api_tokens,
    audit_log,
    course_budgets,
    course_datasets,
    course_home_snapshots,
    course_networks,
    course_reclaim,
    course_staff,
    courses,
    enrollments,
    gpu_allocations,
    gpu_usage_hours,
    gpus,
    images,
    instance_activity,
    instance_usage,
    instances,
    kept_homes,
    join_tokens,
    lxd_certificates,
    lxd_trust_tokens,
    node_certificates,
    node_images,
    nodes,
    notebook_passes,
    operation_items,
    operations,
    orphans,
    portal_sessions,
    sign_in_passwords,
    ssh_keys,
    student_budgets,
    users,
);

diesel::table! {
    course_archives (id) {
        id -> Int8,
        course_id -> Int8,
        user_id -> Int8,
        path -> Text,
        sha256 -> Text,
        size_bytes -> Int8,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
    }
}

diesel::joinable!(course_archives -> courses (course_id));
diesel::joinable!(course_archives -> users (user_id));
diesel::allow_tables_to_appear_in_same_query!(course_archives, courses);
diesel::allow_tables_to_appear_in_same_query!(course_archives, users);

diesel::table! {
    course_gpu_modes (course_id) {
        course_id -> Int8,
        gpu_mode -> Text,
        gpu_lease_max_hours -> Float8,
    }
}

diesel::table! {
    gpu_leases (id) {
        id -> Int8,
        instance_id -> Int8,
        user_id -> Int8,
        course_id -> Int8,
        node_id -> Nullable<Int8>,
        gpu_id -> Nullable<Int8>,
        hours -> Float8,
        state -> Text,
        requested_at -> Timestamptz,
        granted_at -> Nullable<Timestamptz>,
        ends_at -> Nullable<Timestamptz>,
        ended_at -> Nullable<Timestamptz>,
        end_reason -> Nullable<Text>,
    }
}

diesel::joinable!(course_gpu_modes -> courses (course_id));
diesel::joinable!(gpu_leases -> instances (instance_id));
diesel::joinable!(gpu_leases -> users (user_id));
diesel::allow_tables_to_appear_in_same_query!(gpu_leases, instances);
diesel::allow_tables_to_appear_in_same_query!(gpu_leases, users);
diesel::allow_tables_to_appear_in_same_query!(gpu_leases, nodes);
diesel::allow_tables_to_appear_in_same_query!(gpu_leases, gpus);
diesel::allow_tables_to_appear_in_same_query!(gpu_leases, courses);
diesel::allow_tables_to_appear_in_same_query!(gpu_leases, gpu_allocations);
diesel::allow_tables_to_appear_in_same_query!(gpu_leases, gpu_usage_hours);
diesel::allow_tables_to_appear_in_same_query!(gpu_leases, course_budgets);
diesel::allow_tables_to_appear_in_same_query!(course_gpu_modes, courses);

diesel::table! {
    reclaim_warnings (instance_id, reason) {
        instance_id -> Int8,
        reason -> Text,
        action -> Text,
        warned_at -> Timestamptz,
        due_at -> Timestamptz,
        kept_at -> Nullable<Timestamptz>,
    }
}

diesel::joinable!(reclaim_warnings -> instances (instance_id));
diesel::allow_tables_to_appear_in_same_query!(reclaim_warnings, instances);

diesel::table! {
    batch_jobs (id) {
        id -> Int8,
        instance_id -> Int8,
        user_id -> Int8,
        course_id -> Nullable<Int8>,
        command -> Array<Text>,
        workdir -> Nullable<Text>,
        environment -> Jsonb,
        gpus -> Int4,
        hours -> Float8,
        priority -> Int4,
        state -> Text,
        lease_id -> Nullable<Int8>,
        node_id -> Nullable<Int8>,
        submitted_at -> Timestamptz,
        started_at -> Nullable<Timestamptz>,
        ends_at -> Nullable<Timestamptz>,
        warned_at -> Nullable<Timestamptz>,
        ended_at -> Nullable<Timestamptz>,
        exit_code -> Nullable<Int4>,
        reason -> Nullable<Text>,
        stop_reason -> Nullable<Text>,
        stop_state -> Nullable<Text>,
        gpu_seconds -> Float8,
    }
}

diesel::table! {
    course_job_limits (course_id) {
        course_id -> Int8,
        max_running -> Int4,
        max_queued -> Int4,
    }
}

diesel::joinable!(batch_jobs -> instances (instance_id));
diesel::joinable!(batch_jobs -> users (user_id));
diesel::joinable!(course_job_limits -> courses (course_id));
diesel::allow_tables_to_appear_in_same_query!(batch_jobs, instances);
diesel::allow_tables_to_appear_in_same_query!(batch_jobs, users);
diesel::allow_tables_to_appear_in_same_query!(batch_jobs, courses);
diesel::allow_tables_to_appear_in_same_query!(batch_jobs, nodes);
diesel::allow_tables_to_appear_in_same_query!(batch_jobs, gpu_leases);
diesel::allow_tables_to_appear_in_same_query!(course_job_limits, courses);
