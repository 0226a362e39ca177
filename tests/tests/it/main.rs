//! The e2e tests of `cohort-e2e` that may run side by side, in one binary (one link of the
//! workspace instead of one per file): each former `tests/*.rs` file is a module here, and
//! `cli_support` and `net_support` are the modules they share. What disturbs the daemons or
//! the process environment that every test shares is in `serial/` instead.

mod cli_support;
mod net_support;

mod accounts;
mod agent_lxd;
mod agent_network;
mod agent_network_macvlan;
mod agent_network_ssh;
mod agent_ssh;
mod agent_tls;
mod cli_config;
mod cli_controller;
mod cli_course_network;
mod cli_courses;
mod cli_image_distribute;
mod cli_instances;
mod cli_lxc;
mod cli_publish;
mod cluster_images;
mod controller_api;
mod controller_backup;
mod controller_e2e;
mod controller_enrollment;
mod controller_images;
mod controller_input;
mod controller_instance_io;
mod controller_migrations;
mod controller_placement;
mod controller_poller;
mod controller_worker;
mod course_delete;
mod course_passwords;
mod course_students;
mod courses;
mod desired_state;
mod disk_placement;
mod harness;
mod hostile_callers;
mod instance_config;
mod instance_limits;
mod jupyter;
mod lab;
mod lab_creating;
mod lab_images;
mod lab_move;
mod lab_move_stale;
mod load_and_fuzz;
mod lxc_coverage;
mod lxc_exec;
mod lxc_files;
mod lxc_fleet;
mod lxc_trust;
mod mixed_daemons;
mod node_certificates;
mod node_steps;
mod orphans;
mod portal;
mod portal_course_limits;
mod portal_create;
mod process_limit;
mod pylxd;
