//! Sign-in against the university's directory over LDAP (TLS only: `ldaps://` or StartTLS): the
//! user's DN from a template or from a search, a simple bind as that DN with the password given
//! (the password goes nowhere else and is never logged), and the role from group membership.

use std::sync::Arc;
use std::time::Duration;

use cohort_proto::api::users::Role;
use ldap3::{dn_escape, ldap_escape, Ldap, LdapConnAsync, LdapConnSettings, Scope, SearchEntry};

use crate::app::config::LdapConfig;

/// LDAP result codes a bind answers for a wrong password or a DN that is not there.
const INVALID_CREDENTIALS: u32 = 49;
const NO_SUCH_OBJECT: u32 = 32;

#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// the directory could not be reached, or answered with an error
    #[error("the directory: {0}")]
    Unavailable(String),
    /// the CA file for the directory's certificate is unusable
    #[error("the directory's CA file {path}: {message}")]
    Tls { path: String, message: String },
    /// the directory did not answer in time
    #[error("the directory did not answer within {0} s")]
    Timeout(u64),
}

fn unavailable(e: impl std::fmt::Display) -> DirectoryError {
    DirectoryError::Unavailable(e.to_string())
}

/// Someone the directory vouched for.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectoryUser {
    pub dn: String,
    pub role: Role,
    pub full_name: Option<String>,
    pub email: Option<String>,
}

/// The TLS client for the directory: only the CA file's certificates are trusted.
fn tls_config(cfg: &LdapConfig) -> Result<Arc<rustls::ClientConfig>, DirectoryError> {
    let path = cfg.ca_file.display().to_string();
    let tls = |message: String| DirectoryError::Tls {
        path: path.clone(),
        message,
    };
    let pem = std::fs::read(&cfg.ca_file).map_err(|e| tls(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.map_err(|e| tls(e.to_string()))?;
        // A system bundle holds a few certificates rustls cannot parse; skipping them is right.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(tls("no certificates".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

async fn connect(cfg: &LdapConfig, url: &str) -> Result<Ldap, DirectoryError> {
    let settings = LdapConnSettings::new()
        .set_conn_timeout(Duration::from_secs(cfg.timeout_s))
        .set_starttls(cfg.starttls)
        .set_config(tls_config(cfg)?);
    let (conn, ldap) = LdapConnAsync::with_settings(settings, url)
        .await
        .map_err(unavailable)?;
    ldap3::drive!(conn);
    Ok(ldap)
}

/// Checks `password` for `username` with the directory: `Ok(None)` for an unknown user or a
/// wrong password alike, so the caller cannot tell them apart either.
pub async fn authenticate(
    cfg: &LdapConfig,
    username: &str,
    password: &str,
) -> Result<Option<DirectoryUser>, DirectoryError> {
    let Some(url) = cfg.url.as_deref() else {
        return Ok(None);
    };
    // An empty password is an unauthenticated bind, which a directory answers with success.
    if password.is_empty() || cohort_proto::validate::username(username).is_err() {
        return Ok(None);
    }
    let limit = cfg.timeout_s;
    tokio::time::timeout(Duration::from_secs(limit), async {
        let mut ldap = connect(cfg, url).await?;
        let found = check(cfg, &mut ldap, username, password).await;
        let _ = ldap.unbind().await;
        found
    })
    .await
    .map_err(|_| DirectoryError::Timeout(limit))?
}

/// Binds as the service account, when one is configured (else the search is anonymous).
async fn service_bind(cfg: &LdapConfig, ldap: &mut Ldap) -> Result<(), DirectoryError> {
    if let Some(dn) = &cfg.bind_dn {
        let password = cfg.bind_password.as_deref().unwrap_or_default();
        ldap.simple_bind(dn, password)
            .await
            .map_err(unavailable)?
            .success()
            .map_err(unavailable)?;
    }
    Ok(())
}

/// The user's DN: the template filled in, or the one entry the filter finds (none or several:
/// no one).
async fn user_dn(
    cfg: &LdapConfig,
    ldap: &mut Ldap,
    username: &str,
) -> Result<Option<String>, DirectoryError> {
    if let Some(template) = &cfg.user_dn {
        return Ok(Some(template.replace("{username}", &dn_escape(username))));
    }
    service_bind(cfg, ldap).await?;
    let filter = cfg
        .user_filter
        .replace("{username}", &ldap_escape(username));
    let (entries, _) = ldap
        .search(&cfg.search_base, Scope::Subtree, &filter, vec!["1.1"])
        .await
        .map_err(unavailable)?
        .success()
        .map_err(unavailable)?;
    Ok(match entries.as_slice() {
        [one] => Some(SearchEntry::construct(one.clone()).dn),
        _ => None,
    })
}

async fn check(
    cfg: &LdapConfig,
    ldap: &mut Ldap,
    username: &str,
    password: &str,
) -> Result<Option<DirectoryUser>, DirectoryError> {
    let Some(dn) = user_dn(cfg, ldap, username).await? else {
        return Ok(None);
    };
    let bound = ldap.simple_bind(&dn, password).await.map_err(unavailable)?;
    match bound.rc {
        0 => {}
        INVALID_CREDENTIALS | NO_SUCH_OBJECT => return Ok(None),
        _ => return Err(unavailable(bound)),
    }
    let (entries, _) = ldap
        .search(&dn, Scope::Base, "(objectClass=*)", vec!["cn", "mail"])
        .await
        .map_err(unavailable)?
        .success()
        .map_err(unavailable)?;
    let attrs = entries
        .into_iter()
        .next()
        .map(|e| SearchEntry::construct(e).attrs)
        .unwrap_or_default();
    let first = |name: &str| attrs.get(name).and_then(|v| v.first().cloned());
    // Groups are read as the service account when there is one, else as the user.
    service_bind(cfg, ldap).await?;
    let role = if member_of(ldap, cfg.admin_group.as_deref(), &dn, username).await? {
        Role::Admin
    } else if member_of(ldap, cfg.instructor_group.as_deref(), &dn, username).await? {
        Role::Instructor
    } else {
        Role::Student
    };
    Ok(Some(DirectoryUser {
        dn,
        role,
        full_name: first("cn"),
        email: first("mail"),
    }))
}

/// Whether the group lists the user, as `member`/`uniqueMember` (DNs) or `memberUid` (names).
async fn member_of(
    ldap: &mut Ldap,
    group: Option<&str>,
    dn: &str,
    username: &str,
) -> Result<bool, DirectoryError> {
    let Some(group) = group else {
        return Ok(false);
    };
    let filter = format!(
        "(|(member={dn})(uniqueMember={dn})(memberUid={uid}))",
        dn = ldap_escape(dn),
        uid = ldap_escape(username)
    );
    let (entries, _) = ldap
        .search(group, Scope::Base, &filter, vec!["1.1"])
        .await
        .map_err(unavailable)?
        .success()
        .map_err(unavailable)?;
    Ok(!entries.is_empty())
}
