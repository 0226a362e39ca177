//! The client's configuration file, shaped like lxc's `config.yml`: remotes (controller URL, API
//! token, pinned certificate fingerprint) and the default remote. It holds tokens, so it is
//! written with mode 0600.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Environment variable that moves the configuration: a directory (like lxc's `LXD_CONF`) holding
/// `config.yml`, or, when it ends in `.yml`/`.yaml`, the file itself.
pub const CONF_ENV: &str = "COHORT_CONF";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No home directory: set `COHORT_CONF`.
    #[error("cannot find the configuration: neither HOME nor {CONF_ENV} is set")]
    NoHome,
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot parse {path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_yaml::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("Remote {0} doesn't exist")]
    NoSuchRemote(String),
    #[error("The remote \"{0}\" doesn't exist")]
    UnknownPrefix(String),
    #[error("Remote {0} exists as <{1}>")]
    RemoteExists(String, String),
    #[error("Can't remove the default remote")]
    RemoveDefault,
    #[error("No remote is configured; add one with: cohort remote add NAME URL --token TOKEN")]
    NoDefault,
    #[error("Invalid remote name {0:?}: use letters, digits, '-', '_' and '.'")]
    BadName(String),
}

/// One controller the client knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remote {
    /// Base URL, e.g. `https://lab.example.edu:8443`.
    pub addr: String,
    /// Bearer API token.
    pub token: String,
    /// SHA-256 of the controller's certificate (DER), lower-case hex, pinned at `remote add`.
    pub fingerprint: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    #[serde(rename = "default-remote", default)]
    pub default_remote: String,
    #[serde(default)]
    pub remotes: BTreeMap<String, Remote>,
    /// Written back as lxc writes it; Cohort defines no aliases yet.
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    #[serde(skip)]
    path: PathBuf,
}

impl Config {
    /// Where the configuration lives: `$COHORT_CONF` or `~/.config/cohort/config.yml`.
    pub fn default_path() -> Result<PathBuf, ConfigError> {
        if let Some(conf) = std::env::var_os(CONF_ENV).filter(|v| !v.is_empty()) {
            let conf = PathBuf::from(conf);
            let is_file = conf.extension().is_some_and(|e| e == "yml" || e == "yaml");
            return Ok(if is_file {
                conf
            } else {
                conf.join("config.yml")
            });
        }
        let home = std::env::var_os("HOME").ok_or(ConfigError::NoHome)?;
        Ok(PathBuf::from(home).join(".config/cohort/config.yml"))
    }

    /// Reads the file at `path`; a missing file is an empty configuration.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let mut config = match std::fs::read_to_string(path) {
            Ok(text) if text.trim().is_empty() => Config::default(),
            Ok(text) => serde_yaml::from_str(&text).map_err(|source| ConfigError::Parse {
                path: path.to_owned(),
                source,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Config::default(),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        config.path = path.to_owned();
        Ok(config)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the file atomically (temp file + rename), mode 0600, creating its directory.
    pub fn save(&self) -> Result<(), ConfigError> {
        let err = |source| ConfigError::Write {
            path: self.path.clone(),
            source,
        };
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(err)?;
        let text = serde_yaml::to_string(self).expect("config serializes");
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
        tmp.write_all(text.as_bytes()).map_err(err)?;
        // NamedTempFile is created 0600 already; the rename keeps the mode.
        tmp.persist(&self.path).map_err(|e| err(e.error))?;
        Ok(())
    }

    pub fn remote(&self, name: &str) -> Result<&Remote, ConfigError> {
        self.remotes
            .get(name)
            .ok_or_else(|| ConfigError::NoSuchRemote(name.to_string()))
    }

    /// The default remote's name; an error when none is configured.
    pub fn default_name(&self) -> Result<&str, ConfigError> {
        if self.remotes.contains_key(&self.default_remote) {
            Ok(&self.default_remote)
        } else {
            Err(ConfigError::NoDefault)
        }
    }

    /// Adds a remote; the first one added becomes the default.
    pub fn add_remote(&mut self, name: &str, remote: Remote) -> Result<(), ConfigError> {
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(ConfigError::BadName(name.to_string()));
        }
        if let Some(existing) = self.remotes.get(name) {
            return Err(ConfigError::RemoteExists(
                name.to_string(),
                existing.addr.clone(),
            ));
        }
        self.remotes.insert(name.to_string(), remote);
        if !self.remotes.contains_key(&self.default_remote) {
            self.default_remote = name.to_string();
        }
        Ok(())
    }

    pub fn remove_remote(&mut self, name: &str) -> Result<(), ConfigError> {
        self.remote(name)?;
        if self.default_remote == name {
            return Err(ConfigError::RemoveDefault);
        }
        self.remotes.remove(name);
        Ok(())
    }

    pub fn switch_remote(&mut self, name: &str) -> Result<(), ConfigError> {
        self.remote(name)?;
        self.default_remote = name.to_string();
        Ok(())
    }

    /// Splits `[<remote>:]<name>` as lxc does: the part before the first ':' must be a known
    /// remote; without a ':' the default remote is meant. `remote:` alone gives an empty name.
    pub fn parse_remote(&self, raw: &str) -> Result<(String, String), ConfigError> {
        match raw.split_once(':') {
            None => Ok((self.default_name()?.to_string(), raw.to_string())),
            Some((remote, name)) => {
                if !self.remotes.contains_key(remote) {
                    return Err(ConfigError::UnknownPrefix(remote.to_string()));
                }
                Ok((remote.to_string(), name.to_string()))
            }
        }
    }
}
