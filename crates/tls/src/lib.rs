//! The TLS pieces the agent, the controller and the CLI share.
//!
//! - [`fingerprint`]: a certificate's lower-case hex SHA-256, the form `lxc` shows and the
//!   controller pins.
//! - [`certs_from_pem`], [`key_from_pem`]: PEM into rustls types, with errors that say which file.
//! - [`ServerCheck`] and [`ClientCheck`]: the one place rustls's verifier traits are implemented.
//!   Each is a base verification (a CA chain, or only the handshake's signatures) followed by one
//!   extra check of the peer's certificate (a pin, a role, a capture). Every verifier Cohort uses
//!   is one of these with its own check, so the signature and scheme delegation is written once.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// a PEM buffer holds nothing usable
    #[error("{what}: {message}")]
    Pem { what: String, message: String },
    /// rustls refused the configuration
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// a verifier could not be built
    #[error("certificate verifier: {0}")]
    Verifier(String),
}

/// Lower-case hex SHA-256 of a DER certificate.
pub fn fingerprint(der: &[u8]) -> String {
    hex::encode(Sha256::digest(der))
}

/// The crypto provider every Cohort TLS configuration uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in a PEM buffer; none is an error naming `what`.
pub fn certs_from_pem(what: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem_error = |message: String| TlsError::Pem {
        what: what.into(),
        message,
    };
    let certs: Vec<_> = rustls_pemfile::certs(&mut &*pem)
        .collect::<Result<_, _>>()
        .map_err(|e| pem_error(e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_error("no certificate in PEM".into()));
    }
    Ok(certs)
}

/// The private key in a PEM buffer; none is an error naming `what`.
pub fn key_from_pem(what: &str, pem: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem_error = |message: String| TlsError::Pem {
        what: what.into(),
        message,
    };
    rustls_pemfile::private_key(&mut &*pem)
        .map_err(|e| pem_error(e.to_string()))?
        .ok_or_else(|| pem_error("no private key in PEM".into()))
}

/// A root store holding every certificate of a PEM buffer.
pub fn roots_from_pem(what: &str, pem: &[u8]) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for ca in certs_from_pem(what, pem)? {
        roots.add(ca)?;
    }
    Ok(roots)
}

/// The organizational units in a certificate's Subject (Cohort's roles); none if it does not parse.
pub fn subject_roles(der: &[u8]) -> Vec<String> {
    match x509_parser::parse_x509_certificate(der) {
        Ok((_, cert)) => cert
            .subject()
            .iter_organizational_unit()
            .filter_map(|ou| ou.as_str().ok().map(str::to_string))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The check a verifier makes of the peer's end-entity certificate after its base verification.
pub type PeerCheck = Arc<dyn Fn(&CertificateDer<'_>) -> Result<(), rustls::Error> + Send + Sync>;

/// Checks nothing more than the base verification.
pub fn no_check() -> PeerCheck {
    Arc::new(|_| Ok(()))
}

/// Accepts only a certificate whose fingerprint is one of `pins` (compared without case).
pub fn pinned(pins: Vec<String>) -> PeerCheck {
    Arc::new(move |cert| {
        let seen = fingerprint(cert.as_ref());
        if pins.iter().any(|p| p.eq_ignore_ascii_case(&seen)) {
            Ok(())
        } else {
            Err(rustls::Error::General(format!(
                "certificate fingerprint mismatch: pinned {}, the peer presented {seen}",
                pins.join(" or ")
            )))
        }
    })
}

/// Accepts only a certificate whose Subject carries the organizational unit `role`.
pub fn with_role(role: &'static str) -> PeerCheck {
    Arc::new(move |cert| {
        if subject_roles(cert.as_ref()).iter().any(|r| r == role) {
            Ok(())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    })
}

/// What a [`ServerCheck`] verifies before its extra check.
#[derive(Debug)]
pub enum ServerBase {
    /// The chain to a CA and the server name (WebPKI).
    Chain(Arc<WebPkiServerVerifier>),
    /// Only the handshake's signatures: the peer holds the key of the certificate it shows. For
    /// a pin, which replaces chain and name (the CLI's `remote add`).
    SignaturesOnly(Arc<CryptoProvider>),
}

impl ServerBase {
    /// The WebPKI chain to the CAs in `ca_pem`.
    pub fn chain(ca_pem: &[u8]) -> Result<Self, TlsError> {
        let roots = roots_from_pem("CA certificate", ca_pem)?;
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| TlsError::Verifier(e.to_string()))?;
        Ok(ServerBase::Chain(verifier))
    }

    pub fn signatures_only() -> Self {
        ServerBase::SignaturesOnly(provider())
    }
}

/// A server certificate verifier: [`ServerBase`], then `check`.
pub struct ServerCheck {
    pub base: ServerBase,
    pub check: PeerCheck,
}

impl ServerCheck {
    pub fn new(base: ServerBase, check: PeerCheck) -> Arc<Self> {
        Arc::new(ServerCheck { base, check })
    }
}

impl fmt::Debug for ServerCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerCheck")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// The handshake signature checks of `provider`, shared by both sides.
fn signature12(
    provider: &CryptoProvider,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    verify_tls12_signature(
        message,
        cert,
        dss,
        &provider.signature_verification_algorithms,
    )
}

fn signature13(
    provider: &CryptoProvider,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    verify_tls13_signature(
        message,
        cert,
        dss,
        &provider.signature_verification_algorithms,
    )
}

impl ServerCertVerifier for ServerCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The extra check first: a pin mismatch says so rather than "unknown issuer".
        (self.check)(end_entity)?;
        if let ServerBase::Chain(chain) = &self.base {
            chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match &self.base {
            ServerBase::Chain(chain) => chain.verify_tls12_signature(message, cert, dss),
            ServerBase::SignaturesOnly(provider) => signature12(provider, message, cert, dss),
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match &self.base {
            ServerBase::Chain(chain) => chain.verify_tls13_signature(message, cert, dss),
            ServerBase::SignaturesOnly(provider) => signature13(provider, message, cert, dss),
        }
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        match &self.base {
            ServerBase::Chain(chain) => chain.supported_verify_schemes(),
            ServerBase::SignaturesOnly(provider) => provider
                .signature_verification_algorithms
                .supported_schemes(),
        }
    }
}

/// What a [`ClientCheck`] verifies before its extra check.
pub enum ClientBase {
    /// A certificate chaining to a CA is required (WebPKI).
    Chain(Arc<dyn ClientCertVerifier>),
    /// Any certificate whose key signs the handshake, asked for but not required: who the client
    /// is comes from elsewhere (the LXD-style API's trust store, by fingerprint).
    AnyOptional(Arc<CryptoProvider>),
}

impl ClientBase {
    /// A client certificate chaining to the CAs in `ca_pem`, required.
    pub fn chain(ca_pem: &[u8]) -> Result<Self, TlsError> {
        let roots = roots_from_pem("CA certificate", ca_pem)?;
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider(),
        )
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
        Ok(ClientBase::Chain(verifier))
    }

    pub fn any_optional() -> Self {
        ClientBase::AnyOptional(provider())
    }
}

/// A client certificate verifier: [`ClientBase`], then `check`.
pub struct ClientCheck {
    pub base: ClientBase,
    pub check: PeerCheck,
}

impl ClientCheck {
    pub fn new(base: ClientBase, check: PeerCheck) -> Arc<Self> {
        Arc::new(ClientCheck { base, check })
    }
}

impl fmt::Debug for ClientCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let base = match self.base {
            ClientBase::Chain(_) => "chain",
            ClientBase::AnyOptional(_) => "any, optional",
        };
        f.debug_struct("ClientCheck")
            .field("base", &base)
            .finish_non_exhaustive()
    }
}

impl ClientCertVerifier for ClientCheck {
    fn client_auth_mandatory(&self) -> bool {
        match &self.base {
            ClientBase::Chain(chain) => chain.client_auth_mandatory(),
            ClientBase::AnyOptional(_) => false,
        }
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        match &self.base {
            ClientBase::Chain(chain) => chain.root_hint_subjects(),
            ClientBase::AnyOptional(_) => &[],
        }
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if let ClientBase::Chain(chain) = &self.base {
            chain.verify_client_cert(end_entity, intermediates, now)?;
        }
        (self.check)(end_entity)?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match &self.base {
            ClientBase::Chain(chain) => chain.verify_tls12_signature(message, cert, dss),
            ClientBase::AnyOptional(provider) => signature12(provider, message, cert, dss),
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match &self.base {
            ClientBase::Chain(chain) => chain.verify_tls13_signature(message, cert, dss),
            ClientBase::AnyOptional(provider) => signature13(provider, message, cert, dss),
        }
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        match &self.base {
            ClientBase::Chain(chain) => chain.supported_verify_schemes(),
            ClientBase::AnyOptional(provider) => provider
                .signature_verification_algorithms
                .supported_schemes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(ou: Option<&str>) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::new(vec!["node".into()]).unwrap();
        if let Some(ou) = ou {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationalUnitName, ou);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn a_pin_takes_only_its_certificate() {
        let (a, b) = (cert(None), cert(None));
        let check = pinned(vec![fingerprint(&a).to_uppercase()]);
        assert!(check(&a).is_ok());
        let refused = check(&b).unwrap_err().to_string();
        assert!(refused.contains(&fingerprint(&b)), "{refused}");
    }

    #[test]
    fn a_role_check_reads_the_subject() {
        let check = with_role("controller");
        assert!(check(&cert(Some("controller"))).is_ok());
        assert!(check(&cert(Some("node"))).is_err());
        assert!(check(&cert(None)).is_err());
    }

    #[test]
    fn a_server_check_runs_its_check_over_signatures_only() {
        let (a, b) = (cert(None), cert(None));
        let verifier =
            ServerCheck::new(ServerBase::signatures_only(), pinned(vec![fingerprint(&a)]));
        let name = ServerName::try_from("node").unwrap();
        let now = UnixTime::now();
        assert!(verifier
            .verify_server_cert(&a, &[], &name, &[], now)
            .is_ok());
        assert!(verifier
            .verify_server_cert(&b, &[], &name, &[], now)
            .is_err());
        assert!(!verifier.supported_verify_schemes().is_empty());
    }

    #[test]
    fn pem_errors_name_the_file() {
        let e = certs_from_pem("CA certificate", b"nothing")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("CA certificate:"), "{e}");
        let e = key_from_pem("node key", b"").unwrap_err().to_string();
        assert!(e.starts_with("node key:"), "{e}");
    }
}
