//! The controller's placement factors as the environment sets them (the quickstart and the
//! benchmarks size a node with them), and a value that is not a number named in the error.

use cohort_controller::app::config::Config;

#[test]
fn each_overcommit_factor_is_read_from_the_environment() {
    let _alone = crate::alone_blocking();
    std::env::set_var("COHORT_CPU_OVERCOMMIT", "16");
    std::env::set_var("COHORT_MEMORY_OVERCOMMIT", "3.5");
    std::env::set_var("COHORT_DISK_OVERCOMMIT", "20");
    let placement = Config::load(None).expect("the configuration").placement;
    assert_eq!(
        (
            placement.cpu_overcommit,
            placement.memory_overcommit,
            placement.disk_overcommit
        ),
        (16.0, 3.5, 20.0)
    );
    std::env::set_var("COHORT_MEMORY_OVERCOMMIT", "lots");
    let err = Config::load(None).unwrap_err().to_string();
    assert!(err.contains("COHORT_MEMORY_OVERCOMMIT"), "{err}");
}
