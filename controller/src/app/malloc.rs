//! The C allocator told to give large blocks back. glibc raises its mmap threshold to the size of
//! any mapped block that is freed (up to 32 MiB), so after the first portal sign-in freed its
//! argon2id memory (19 MiB), every later one took its 19 MiB from the heap, where a block freed
//! between live small allocations stays resident and the next one often goes elsewhere: a debug
//! controller held 2 GiB after a few hundred sign-ins (`cohort-bench memory`, BENCHMARKS.md),
//! though no more than one hash a core runs at once. A threshold set by hand turns that
//! adjustment off: blocks of [`LARGE_BLOCK`] and more are mapped on their own and unmapped when
//! freed (argon2's memory, a big request body or exec output); the rest is as before.

/// Blocks at least this large are mapped for themselves.
pub const LARGE_BLOCK: usize = 1 << 20;

/// Sets the threshold; called first in `main`, before any thread starts. Whether glibc took it.
#[cfg(target_env = "gnu")]
#[allow(unsafe_code)]
pub fn return_large_blocks() -> bool {
    // SAFETY: mallopt only sets an allocator parameter; the value is in its range.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE_BLOCK as libc::c_int) == 1 }
}

/// Other C libraries keep no dynamic threshold to turn off.
#[cfg(not(target_env = "gnu"))]
pub fn return_large_blocks() -> bool {
    true
}
