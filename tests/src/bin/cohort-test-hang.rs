//! A test that hangs, for `it harness::a_test_past_its_limit_ends_the_binary_naming_it_and_its_processes`:
//! on a thread named as libtest names a test's, it arms the harness's watchdog and waits on a
//! `sleep 127` that outlives any limit the caller sets (`COHORT_TEST_LIMIT_S`). Not a test of
//! the suite, so the suite holds no ignored test.

fn main() {
    std::thread::Builder::new()
        .name("harness::a_hung_test".into())
        .spawn(|| {
            let _watchdog = cohort_e2e::process::Watchdog::arm();
            let _ = std::process::Command::new("sleep").arg("127").status();
        })
        .expect("a thread")
        .join()
        .expect("the hung test's thread");
}
