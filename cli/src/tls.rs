//! Certificate pinning for controller connections, as lxc pins a remote's certificate: the
//! controller's own CA is in no trust store, so the client remembers the SHA-256 fingerprint of
//! the certificate it saw at `remote add` and accepts that certificate and no other.

use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, Error, SignatureScheme};
use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256 of a DER certificate, the form lxc shows and stores.
pub fn fingerprint(der: &[u8]) -> String {
    hex::encode(Sha256::digest(der))
}

/// What the verifier does with the server's certificate.
#[derive(Debug)]
enum Policy {
    /// Accept only the certificate with this fingerprint.
    Pinned(String),
    /// Accept any certificate and keep it, so `remote add` can show it before trusting it.
    Capture(Arc<Mutex<Option<Vec<u8>>>>),
}

/// A rustls verifier that replaces chain and name checks with a fingerprint pin. Handshake
/// signatures are still checked, so the peer must hold the pinned certificate's key.
#[derive(Debug)]
pub struct PinnedVerifier {
    policy: Policy,
    provider: Arc<CryptoProvider>,
}

impl PinnedVerifier {
    fn new(policy: Policy) -> Self {
        PinnedVerifier {
            policy,
            provider: Arc::new(rustls::crypto::ring::default_provider()),
        }
    }
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match &self.policy {
            Policy::Pinned(expected) => {
                let seen = fingerprint(end_entity.as_ref());
                if seen.eq_ignore_ascii_case(expected) {
                    Ok(ServerCertVerified::assertion())
                } else {
                    Err(Error::General(format!(
                        "certificate fingerprint mismatch: pinned {expected}, server presented \
                         {seen}"
                    )))
                }
            }
            Policy::Capture(slot) => {
                *slot.lock().expect("capture slot") = Some(end_entity.as_ref().to_vec());
                Ok(ServerCertVerified::assertion())
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn client_config(policy: Policy) -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedVerifier::new(policy)))
        .with_no_client_auth()
}

/// TLS settings that accept only the certificate with `fingerprint`.
pub fn pinned_config(fingerprint: &str) -> ClientConfig {
    client_config(Policy::Pinned(fingerprint.to_ascii_lowercase()))
}

/// TLS settings that accept any certificate and store it in the returned slot.
pub fn capture_config() -> (ClientConfig, Arc<Mutex<Option<Vec<u8>>>>) {
    let slot = Arc::new(Mutex::new(None));
    (client_config(Policy::Capture(slot.clone())), slot)
}
