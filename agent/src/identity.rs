//! The node's TLS identity over time. The controller renews it before it expires, over the
//! mutual-TLS channel the current identity already secures: it asks for a CSR (the agent makes a
//! new key and keeps it beside the current one), signs it, and hands the certificate back; the
//! agent then serves the new pair at once, without a restart or a dropped connection.
//!
//! On disk a renewal is written so that a cut at any point leaves a pair that works: the new key
//! and certificate are written as `<key>.next` and `<cert>.next`, then renamed over the current
//! ones key first. [`promote_pending`] (run at every start) finishes a renewal cut between or
//! after the writes and drops a `.next` certificate whose key is gone.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use chrono::{DateTime, Utc};
use cohort_proto::agent::IdentityInfo;
use rcgen::KeyPair;
use rustls::pki_types::CertificateDer;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::tls::{certs_from_pem, key_from_pem, TlsError};

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// a key or certificate file could not be read or written
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// a PEM text holds no usable key or certificate
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// the certificate is not for the key the agent made
    #[error("the certificate is not for the key of the last CSR ({0})")]
    KeyMismatch(String),
    /// no CSR was asked for, or the agent runs without a state directory
    #[error("{0}")]
    NotPending(String),
    /// a key or CSR could not be made
    #[error("making the key or CSR: {0}")]
    Crypto(String),
}

/// Paths of the key and certificate the agent serves with.
#[derive(Debug, Clone)]
pub struct IdentityFiles {
    pub key: PathBuf,
    pub cert: PathBuf,
}

impl IdentityFiles {
    fn next(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_os_string();
        name.push(".next");
        PathBuf::from(name)
    }
    pub fn next_key(&self) -> PathBuf {
        Self::next(&self.key)
    }
    pub fn next_cert(&self) -> PathBuf {
        Self::next(&self.cert)
    }
}

/// The identity served now; swapped in place by a renewal.
pub struct Identity {
    files: Option<IdentityFiles>,
    node_name: String,
    current: RwLock<Arc<CertifiedKey>>,
    info: RwLock<IdentityInfo>,
    /// One renewal step at a time.
    renewing: Mutex<()>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("files", &self.files)
            .field("info", &self.info())
            .finish()
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> IdentityError + '_ {
    move |source| IdentityError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn read(path: &Path) -> Result<String, IdentityError> {
    std::fs::read_to_string(path).map_err(io(path))
}

/// Writes `text` to `path` (replacing it) with `mode`, and syncs it to disk.
fn write_synced(path: &Path, text: &str, mode: u32) -> Result<(), IdentityError> {
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io(path))?;
    file.write_all(text.as_bytes()).map_err(io(path))?;
    file.sync_all().map_err(io(path))
}

fn rename(from: &Path, to: &Path) -> Result<(), IdentityError> {
    std::fs::rename(from, to).map_err(io(from))?;
    if let Some(dir) = to.parent() {
        // The rename is durable once the directory is.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Whether the certificate in `cert_pem` carries the public key of `key_pem`.
pub fn pair_matches(key_pem: &str, cert_pem: &str) -> bool {
    let Ok(key) = KeyPair::from_pem(key_pem) else {
        return false;
    };
    let Ok(certs) = certs_from_pem("certificate", cert_pem.as_bytes()) else {
        return false;
    };
    match x509_parser::parse_x509_certificate(&certs[0]) {
        Ok((_, cert)) => cert.public_key().subject_public_key.data.as_ref() == key.public_key_raw(),
        Err(_) => false,
    }
}

/// Finishes or drops a renewal that was cut off (see the module's doc). Returns whether a new
/// pair was promoted.
pub fn promote_pending(files: &IdentityFiles) -> Result<bool, IdentityError> {
    let (next_key, next_cert) = (files.next_key(), files.next_cert());
    if !next_cert.exists() {
        return Ok(false);
    }
    let cert = read(&next_cert)?;
    if next_key.exists() && pair_matches(&read(&next_key)?, &cert) {
        rename(&next_key, &files.key)?;
        rename(&next_cert, &files.cert)?;
        return Ok(true);
    }
    if pair_matches(&read(&files.key)?, &cert) {
        // Cut between the two renames: the key is already the new one.
        rename(&next_cert, &files.cert)?;
        return Ok(true);
    }
    tracing::warn!(path = %next_cert.display(), "dropping a renewed certificate whose key is gone");
    std::fs::remove_file(&next_cert).map_err(io(&next_cert))?;
    Ok(false)
}

fn info_of(cert: &CertificateDer<'_>) -> IdentityInfo {
    let not_after = x509_parser::parse_x509_certificate(cert)
        .ok()
        .and_then(|(_, c)| DateTime::<Utc>::from_timestamp(c.validity().not_after.timestamp(), 0))
        .unwrap_or_default();
    IdentityInfo {
        fingerprint: cohort_tls::fingerprint(cert),
        not_after,
    }
}

fn certified(
    cert_pem: &str,
    key_pem: &str,
) -> Result<(Arc<CertifiedKey>, IdentityInfo), IdentityError> {
    let chain = certs_from_pem("agent certificate", cert_pem.as_bytes())?;
    let key = key_from_pem("agent key", key_pem.as_bytes())?;
    let provider = rustls::crypto::ring::default_provider();
    let info = info_of(&chain[0]);
    let certified = CertifiedKey::from_der(chain, key, &provider).map_err(TlsError::from)?;
    Ok((Arc::new(certified), info))
}

impl Identity {
    /// The pair in `files`, after finishing any renewal that was cut off.
    pub fn load(files: IdentityFiles, node_name: &str) -> Result<Identity, IdentityError> {
        if promote_pending(&files)? {
            tracing::info!("finished a certificate renewal that was cut off");
        }
        let (current, info) = certified(&read(&files.cert)?, &read(&files.key)?)?;
        Ok(Identity {
            files: Some(files),
            node_name: node_name.to_string(),
            current: RwLock::new(current),
            info: RwLock::new(info),
            renewing: Mutex::new(()),
        })
    }

    /// A pair held in memory only (tests); it cannot be renewed.
    pub fn in_memory(cert_pem: &str, key_pem: &str) -> Result<Identity, IdentityError> {
        let (current, info) = certified(cert_pem, key_pem)?;
        Ok(Identity {
            files: None,
            node_name: String::new(),
            current: RwLock::new(current),
            info: RwLock::new(info),
            renewing: Mutex::new(()),
        })
    }

    /// The certificate served now.
    pub fn info(&self) -> IdentityInfo {
        self.info.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn files(&self) -> Result<&IdentityFiles, IdentityError> {
        self.files.as_ref().ok_or_else(|| {
            IdentityError::NotPending("this agent's identity is not kept on disk".into())
        })
    }

    /// Makes the next key (written as `<key>.next`, 0600) and answers its CSR; the current pair
    /// stays in use. A second call replaces the pending key.
    pub fn prepare(&self) -> Result<String, IdentityError> {
        let files = self.files()?;
        let _one = self.renewing.lock().unwrap_or_else(|p| p.into_inner());
        let (key, csr) = crate::enroll::key_and_csr(&self.node_name)
            .map_err(|e| IdentityError::Crypto(e.to_string()))?;
        write_synced(&files.next_key(), &key.serialize_pem(), 0o600)?;
        Ok(csr)
    }

    /// Takes the certificate for the pending key: written beside the current pair, promoted
    /// over it, then served from the next handshake on.
    pub fn install(&self, cert_pem: &str) -> Result<IdentityInfo, IdentityError> {
        let files = self.files()?;
        let _one = self.renewing.lock().unwrap_or_else(|p| p.into_inner());
        let next_key = files.next_key();
        if !next_key.exists() {
            return Err(IdentityError::NotPending(
                "no key is waiting for a certificate: ask for a CSR first".into(),
            ));
        }
        let key_pem = read(&next_key)?;
        if !pair_matches(&key_pem, cert_pem) {
            return Err(IdentityError::KeyMismatch(next_key.display().to_string()));
        }
        let (current, info) = certified(cert_pem, &key_pem)?;
        write_synced(&files.next_cert(), cert_pem, 0o644)?;
        promote_pending(files)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = current;
        *self.info.write().unwrap_or_else(|p| p.into_inner()) = info.clone();
        tracing::info!(fingerprint = %info.fingerprint, not_after = %info.not_after, "serving a renewed certificate");
        Ok(info)
    }
}

impl ResolvesServerCert for Identity {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType};

    fn pair() -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["n".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, "n");
        let cert = params.self_signed(&key).unwrap();
        (key.serialize_pem(), cert.pem())
    }

    fn files(dir: &Path) -> IdentityFiles {
        IdentityFiles {
            key: dir.join("node.key"),
            cert: dir.join("node.crt"),
        }
    }

    fn write(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    fn cert_for(key_pem: &str) -> String {
        let key = KeyPair::from_pem(key_pem).unwrap();
        CertificateParams::new(vec!["n".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap()
            .pem()
    }

    #[test]
    fn a_renewal_cut_at_any_point_leaves_a_matching_pair() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let (old_key, old_cert) = pair();
        let (new_key, new_cert) = pair();
        let reset = || {
            for p in [&f.key, &f.cert, &f.next_key(), &f.next_cert()] {
                let _ = std::fs::remove_file(p);
            }
            write(&f.key, &old_key);
            write(&f.cert, &old_cert);
        };
        let served = || (read(&f.key).unwrap(), read(&f.cert).unwrap());

        // Cut after the CSR: only the next key exists; the old pair stays.
        reset();
        write(&f.next_key(), &new_key);
        assert!(!promote_pending(&f).unwrap());
        assert_eq!(served(), (old_key.clone(), old_cert.clone()));

        // Cut after both next files were written: the new pair is promoted.
        reset();
        write(&f.next_key(), &new_key);
        write(&f.next_cert(), &new_cert);
        assert!(promote_pending(&f).unwrap());
        assert_eq!(served(), (new_key.clone(), new_cert.clone()));

        // Cut between the two renames: the key is new, the certificate is finished.
        reset();
        write(&f.key, &new_key);
        write(&f.next_cert(), &new_cert);
        assert!(promote_pending(&f).unwrap());
        assert_eq!(served(), (new_key.clone(), new_cert.clone()));

        // A next certificate for a key that is nowhere is dropped, the old pair kept.
        reset();
        write(&f.next_cert(), &new_cert);
        assert!(!promote_pending(&f).unwrap());
        assert!(!f.next_cert().exists());
        assert_eq!(served(), (old_key, old_cert));
    }

    #[test]
    fn install_takes_only_the_certificate_of_the_pending_key_and_serves_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let (old_key, old_cert) = pair();
        write(&f.key, &old_key);
        write(&f.cert, &old_cert);
        let identity = Identity::load(f.clone(), "n").unwrap();
        let before = identity.info();

        let err = identity.install(&old_cert).unwrap_err();
        assert!(matches!(err, IdentityError::NotPending(_)), "{err}");

        identity.prepare().unwrap();
        let stranger = pair().1;
        let err = identity.install(&stranger).unwrap_err();
        assert!(matches!(err, IdentityError::KeyMismatch(_)), "{err}");
        assert_eq!(
            identity.info(),
            before,
            "a refused certificate changes nothing"
        );

        let new_cert = cert_for(&read(&f.next_key()).unwrap());
        let after = identity.install(&new_cert).unwrap();
        assert_ne!(after.fingerprint, before.fingerprint);
        assert_eq!(identity.info(), after);
        assert_eq!(read(&f.cert).unwrap(), new_cert);
        assert!(pair_matches(&read(&f.key).unwrap(), &new_cert));
        assert!(!f.next_key().exists() && !f.next_cert().exists());
        // A restart serves the same pair.
        assert_eq!(Identity::load(f, "n").unwrap().info(), after);
    }
}
