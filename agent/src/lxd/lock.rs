//! The daemon-wide lock: a `flock` on a file named after the LXD socket, shared by every agent
//! driving the same daemon. First starts, idmap range reservations (`idmap`) and address
//! reservations (`network`) are made under it.

/// The lock file of the daemon behind `socket`.
pub(crate) fn start_lock_path(socket: &std::path::Path) -> std::path::PathBuf {
    use sha2::{Digest, Sha256};
    let tag = hex::encode(&Sha256::digest(socket.as_os_str().as_encoded_bytes())[..8]);
    std::env::temp_dir().join(format!("cohort-lxd-start-{tag}.lock"))
}

/// Holds an exclusive `flock` on a file named after the LXD socket, so that every agent driving
/// the same daemon starts one container at a time (see `instances::lifecycle`). `None` when the lock
/// file cannot be made; the start then goes ahead unserialised.
pub(crate) async fn start_lock(
    socket: &std::path::Path,
) -> Option<nix::fcntl::Flock<std::fs::File>> {
    let path = start_lock_path(socket);
    tokio::task::spawn_blocking(move || {
        let file = std::fs::File::create(&path).ok()?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).ok()
    })
    .await
    .ok()
    .flatten()
}
