//! The image tarballs `scripts/setup` leaves in Cohort's cache (`COHORT_CACHE_DIR`, else
//! `/var/cache/cohort`), for tests that import an image through the controller.

use std::path::PathBuf;

/// The cache directory `scripts/setup` and `images/build` fill.
fn cache_dir() -> String {
    std::env::var("COHORT_CACHE_DIR").unwrap_or_else(|_| "/var/cache/cohort".into())
}

/// The base image tarball `scripts/setup` built (its SHA-256 is its LXD fingerprint).
pub fn base_tarball() -> PathBuf {
    tarball("base").unwrap_or_else(|| {
        panic!(
            "no cohort-base tarball in {} (run scripts/setup)",
            cache_dir()
        )
    })
}

/// The `cohort-NAME-*.tar.gz` in the cache, if `images/build NAME` made one.
pub fn tarball(name: &str) -> Option<PathBuf> {
    let dir = cache_dir();
    let prefix = format!("cohort-{name}-");
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e} (run scripts/setup)"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".tar.gz"))
        })
}
