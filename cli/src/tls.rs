//! Certificate pinning for controller connections, as lxc pins a remote's certificate: the
//! controller's own CA is in no trust store, so the client remembers the SHA-256 fingerprint of
//! the certificate it saw at `remote add` and accepts that certificate and no other. The
//! verifier itself is `cohort_tls`'s, with only the handshake's signatures as its base.

use std::sync::{Arc, Mutex};

use cohort_tls::{PeerCheck, ServerBase, ServerCheck};
use rustls::ClientConfig;

pub use cohort_tls::fingerprint;

fn client_config(check: PeerCheck) -> ClientConfig {
    ClientConfig::builder_with_provider(cohort_tls::provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .dangerous()
        .with_custom_certificate_verifier(ServerCheck::new(ServerBase::signatures_only(), check))
        .with_no_client_auth()
}

/// TLS settings that accept only the certificate with `fingerprint`.
pub fn pinned_config(fingerprint: &str) -> ClientConfig {
    client_config(cohort_tls::pinned(vec![fingerprint.to_ascii_lowercase()]))
}

/// TLS settings that accept any certificate and store it in the returned slot, so `remote add`
/// can show it before trusting it.
pub fn capture_config() -> (ClientConfig, Arc<Mutex<Option<Vec<u8>>>>) {
    let slot = Arc::new(Mutex::new(None));
    let keep = slot.clone();
    let capture: PeerCheck = Arc::new(move |cert| {
        *keep.lock().unwrap_or_else(|p| p.into_inner()) = Some(cert.as_ref().to_vec());
        Ok(())
    });
    (client_config(capture), slot)
}
