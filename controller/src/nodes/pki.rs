//! The Cohort CA: created by `init` in the state directory (files 0600), it signs the
//! controller's own server and client certificates and every node's leaf from its CSR.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType, SubjectPublicKeyInfo,
};

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const SERVER_CERT: &str = "server.crt";
const SERVER_KEY: &str = "server.key";
const CLIENT_CERT: &str = "client.crt";
const CLIENT_KEY: &str = "client.key";

/// The CA and the controller's own leaves live ten years; a node's leaf lives as long as the
/// configuration says (`COHORT_NODE_CERT_LIFETIME_S`) and is renewed before it ends.
const CA_DAYS: i64 = 3650;

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// a file of the state directory could not be read or written
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// the CA already exists; `init` never overwrites it
    #[error("a CA already exists in {0}")]
    Exists(PathBuf),
    /// the CSR is not a valid, self-signed PKCS#10 request
    #[error("invalid CSR: {0}")]
    InvalidCsr(String),
    /// certificate generation failed
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
}

/// The loaded CA and the controller's own identities, as PEM.
pub struct Pki {
    ca_cert_pem: String,
    ca_key: KeyPair,
    /// The CA re-made from its parameters and key: what rcgen needs as issuer.
    ca_issuer: Certificate,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

/// A node's certificate as issued.
pub struct IssuedCertificate {
    pub pem: String,
    pub fingerprint: String,
    pub not_after: DateTime<Utc>,
}

/// SHA-256 of DER bytes, lowercase hex: how certificates are pinned.
pub fn fingerprint(der: &[u8]) -> String {
    cohort_tls::fingerprint(der)
}

/// Fingerprint of the first certificate in a PEM text.
pub fn pem_fingerprint(pem: &str) -> Option<String> {
    let der = rustls_pemfile::certs(&mut pem.as_bytes()).next()?.ok()?;
    Some(fingerprint(&der))
}

fn read(dir: &Path, name: &str) -> Result<String, PkiError> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).map_err(|source| PkiError::Io { path, source })
}

/// Writes a file readable by its owner only, refusing to replace an existing one.
fn write_private(dir: &Path, name: &str, text: &str) -> Result<(), PkiError> {
    let path = dir.join(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|source| PkiError::Io {
            path: path.clone(),
            source,
        })?;
    file.write_all(text.as_bytes())
        .map_err(|source| PkiError::Io { path, source })
}

/// The public key of a PEM CSR whose signature checks out. Nothing else of the CSR is read:
/// its names and extensions (a CA flag among them) never reach the certificate.
fn csr_public_key(csr_pem: &str) -> Result<SubjectPublicKeyInfo, PkiError> {
    use x509_parser::certification_request::X509CertificationRequest;
    use x509_parser::prelude::FromDer;
    let bad = |e: &dyn std::fmt::Display| PkiError::InvalidCsr(e.to_string());
    let (_, pem) = x509_parser::pem::parse_x509_pem(csr_pem.as_bytes()).map_err(|e| bad(&e))?;
    if pem.label != "CERTIFICATE REQUEST" {
        return Err(PkiError::InvalidCsr(format!(
            "expected a CERTIFICATE REQUEST, got {}",
            pem.label
        )));
    }
    let (_, csr) = X509CertificationRequest::from_der(&pem.contents).map_err(|e| bad(&e))?;
    csr.verify_signature().map_err(|e| bad(&e))?;
    SubjectPublicKeyInfo::from_der(csr.certification_request_info.subject_pki.raw)
        .map_err(|e| bad(&e))
}

fn validity(params: &mut CertificateParams, life: time::Duration) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + life;
}

fn san(name: &str) -> Result<SanType, rcgen::Error> {
    Ok(match name.parse::<std::net::IpAddr>() {
        Ok(ip) => SanType::IpAddress(ip),
        Err(_) => SanType::DnsName(name.try_into()?),
    })
}

fn leaf_params(
    cn: &str,
    ou: &str,
    names: &[String],
    life: time::Duration,
) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, cn);
    params
        .distinguished_name
        .push(DnType::OrganizationalUnitName, ou);
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Cohort");
    params.subject_alt_names = names.iter().map(|n| san(n)).collect::<Result<_, _>>()?;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    validity(&mut params, life);
    Ok(params)
}

impl Pki {
    /// Creates the CA, the server certificate (for `localhost`, `127.0.0.1` and `names`) and the
    /// controller's client certificate in `dir`; refuses if a CA is there already.
    pub fn create(dir: &Path, names: &[String]) -> Result<Pki, PkiError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| PkiError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        if dir.join(CA_KEY).exists() {
            return Err(PkiError::Exists(dir.to_path_buf()));
        }
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::default();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "Cohort CA");
        ca_params
            .distinguished_name
            .push(DnType::OrganizationName, "Cohort");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        validity(&mut ca_params, time::Duration::days(CA_DAYS));
        let ca = ca_params.self_signed(&ca_key)?;

        let mut server_names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        server_names.extend(names.iter().cloned());
        let server_key = KeyPair::generate()?;
        let server = leaf_params(
            "cohort-controller",
            cohort_proto::ROLE_CONTROLLER,
            &server_names,
            time::Duration::days(CA_DAYS),
        )?
        .signed_by(&server_key, &ca, &ca_key)?;
        let client_key = KeyPair::generate()?;
        let client = leaf_params(
            "cohort-controller",
            cohort_proto::ROLE_CONTROLLER,
            &[],
            time::Duration::days(CA_DAYS),
        )?
        .signed_by(&client_key, &ca, &ca_key)?;

        write_private(dir, CA_KEY, &ca_key.serialize_pem())?;
        write_private(dir, CA_CERT, &ca.pem())?;
        write_private(dir, SERVER_KEY, &server_key.serialize_pem())?;
        write_private(dir, SERVER_CERT, &server.pem())?;
        write_private(dir, CLIENT_KEY, &client_key.serialize_pem())?;
        write_private(dir, CLIENT_CERT, &client.pem())?;
        Pki::load(dir)
    }

    /// Loads what `create` wrote.
    pub fn load(dir: &Path) -> Result<Pki, PkiError> {
        let ca_cert_pem = read(dir, CA_CERT)?;
        let ca_key = KeyPair::from_pem(&read(dir, CA_KEY)?)?;
        let ca_issuer = CertificateParams::from_ca_cert_pem(&ca_cert_pem)?.self_signed(&ca_key)?;
        Ok(Pki {
            ca_cert_pem,
            ca_key,
            ca_issuer,
            server_cert_pem: read(dir, SERVER_CERT)?,
            server_key_pem: read(dir, SERVER_KEY)?,
            client_cert_pem: read(dir, CLIENT_CERT)?,
            client_key_pem: read(dir, CLIENT_KEY)?,
        })
    }

    pub fn ca_pem(&self) -> &str {
        &self.ca_cert_pem
    }

    /// What join tokens carry for the agent to pin.
    pub fn ca_fingerprint(&self) -> String {
        pem_fingerprint(&self.ca_cert_pem).unwrap_or_default()
    }

    /// Issues the node's leaf from its CSR. Only the CSR's public key is used: the subject,
    /// names, CA flag and extensions are all the controller's, whatever the CSR asked; the names
    /// are `names`, the ones the admin gave for the node.
    pub fn issue_node_certificate(
        &self,
        csr_pem: &str,
        node_name: &str,
        names: &[String],
        life: std::time::Duration,
    ) -> Result<IssuedCertificate, PkiError> {
        let public_key = csr_public_key(csr_pem)?;
        let life = time::Duration::try_from(life)
            .map_err(|e| PkiError::InvalidCsr(format!("lifetime: {e}")))?;
        let params = leaf_params(node_name, cohort_proto::ROLE_NODE, names, life)?;
        let not_after = DateTime::<Utc>::from_timestamp(params.not_after.unix_timestamp(), 0)
            .unwrap_or_else(Utc::now);
        let cert = params.signed_by(&public_key, &self.ca_issuer, &self.ca_key)?;
        Ok(IssuedCertificate {
            pem: cert.pem(),
            fingerprint: fingerprint(cert.der()),
            not_after,
        })
    }

    /// Renews a node's leaf for the key of `csr_pem`: the same node and the same names as
    /// `current_pem` (the certificate the admin's join gave it), a fresh lifetime.
    pub fn renew_node_certificate(
        &self,
        csr_pem: &str,
        node_name: &str,
        current_pem: &str,
        life: std::time::Duration,
    ) -> Result<IssuedCertificate, PkiError> {
        let names = certificate_names(current_pem)?;
        self.issue_node_certificate(csr_pem, node_name, &names, life)
    }
}

/// The subject alternative names of a PEM certificate, as `leaf_params` takes them.
fn certificate_names(pem: &str) -> Result<Vec<String>, PkiError> {
    use x509_parser::extensions::GeneralName;
    let bad = |e: &dyn std::fmt::Display| PkiError::InvalidCsr(format!("current certificate: {e}"));
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| bad(&e))?;
    let cert = pem.parse_x509().map_err(|e| bad(&e))?;
    let Some(san) = cert.subject_alternative_name().map_err(|e| bad(&e))? else {
        return Ok(Vec::new());
    };
    Ok(san
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some(dns.to_string()),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => Some(std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*bytes).ok()?).to_string()),
                16 => {
                    Some(std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*bytes).ok()?).to_string())
                }
                _ => None,
            },
            _ => None,
        })
        .collect())
}
