//! Backup and restore of a controller: its database (pg_dump's custom format) and its state
//! directory (the CA, the certificates, the image catalog's tarballs) in one gzip'd tar archive
//! led by a manifest. A restore goes onto a fresh host: an empty database and an empty state
//! directory. With the same CA and the same pinned node certificates the agents need nothing
//! done: the restored controller polls them as before, and every port, GPU slot and address it
//! had handed out is in the restored rows, so nothing is handed out twice.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};

use crate::db::queries::backup;

/// Version of the archive's layout; a restore refuses any other.
pub const FORMAT: u32 = 1;
const MANIFEST: &str = "MANIFEST.json";
const DATABASE: &str = "database.pgdump";
const STATE: &str = "state";

/// What an archive holds, written first in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    pub created_at: DateTime<Utc>,
    pub controller_version: String,
    /// The newest migration the backed-up database had.
    pub schema_version: String,
    /// Files of the state directory, relative to it.
    pub state_files: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// a PostgreSQL tool could not be started
    #[error("could not run {tool} (it comes with Debian's postgresql-client): {source}")]
    Spawn {
        tool: &'static str,
        source: io::Error,
    },
    /// a PostgreSQL tool failed
    #[error("{tool} failed: {stderr}")]
    Tool { tool: &'static str, stderr: String },
    /// reading or writing a file
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// the database could not be reached or read
    #[error("database: {0}")]
    Database(String),
    /// the restore target is not fresh
    #[error("{0}")]
    NotFresh(String),
    /// the archive is not one this controller wrote
    #[error("not a Cohort controller backup: {0}")]
    Archive(String),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A libpq connection: the URL without its password, which goes in `PGPASSWORD` instead so it
/// shows in no process list.
fn pg_command(tool: &'static str, database_url: &str) -> Command {
    let mut cmd = Command::new(tool);
    match url::Url::parse(database_url) {
        Ok(mut url) if url.password().is_some() => {
            let password = percent_encoding::percent_decode_str(url.password().unwrap_or(""))
                .decode_utf8_lossy()
                .into_owned();
            let _ = url.set_password(None);
            cmd.env("PGPASSWORD", password)
                .arg("--dbname")
                .arg(url.as_str());
        }
        _ => {
            cmd.arg("--dbname").arg(database_url);
        }
    }
    cmd
}

fn run(tool: &'static str, mut cmd: Command) -> Result<(), BackupError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| BackupError::Spawn { tool, source })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(BackupError::Tool {
            tool,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

fn connect(database_url: &str) -> Result<PgConnection, BackupError> {
    PgConnection::establish(database_url).map_err(|e| BackupError::Database(e.to_string()))
}

/// The files under `dir` (relative paths, sorted); links are refused: the state directory is
/// the controller's own and holds none.
fn state_files(dir: &Path) -> Result<Vec<PathBuf>, BackupError> {
    let mut files = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let here = dir.join(&rel);
        for entry in fs::read_dir(&here).map_err(io_err(&here))? {
            let entry = entry.map_err(io_err(&here))?;
            let kind = entry.file_type().map_err(io_err(&entry.path()))?;
            let child = rel.join(entry.file_name());
            if kind.is_dir() {
                pending.push(child);
            } else if kind.is_file() {
                files.push(child);
            } else {
                return Err(BackupError::Archive(format!(
                    "{} in the state directory is neither a file nor a directory",
                    entry.path().display()
                )));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Writes the archive to `output` (through a temporary file beside it, renamed when complete).
pub fn backup(
    database_url: &str,
    state_dir: &Path,
    output: &Path,
) -> Result<Manifest, BackupError> {
    let work = tempfile::tempdir().map_err(io_err(Path::new("temporary directory")))?;
    let dump = work.path().join(DATABASE);
    let mut cmd = pg_command("pg_dump", database_url);
    cmd.args(["--format=custom", "--no-owner", "--no-privileges", "--file"])
        .arg(&dump);
    run("pg_dump", cmd)?;
    let schema_version = backup::schema_version(&mut connect(database_url)?)
        .map_err(|e| BackupError::Database(e.to_string()))?
        .unwrap_or_default();
    let files = state_files(state_dir)?;
    let manifest = Manifest {
        format: FORMAT,
        created_at: Utc::now(),
        controller_version: env!("CARGO_PKG_VERSION").to_string(),
        schema_version,
        state_files: files.iter().map(|f| f.display().to_string()).collect(),
    };

    let dir = output.parent().filter(|p| !p.as_os_str().is_empty());
    let partial =
        tempfile::NamedTempFile::new_in(dir.unwrap_or(Path::new("."))).map_err(io_err(output))?;
    {
        let gz = GzEncoder::new(
            BufWriter::new(partial.as_file()),
            flate2::Compression::fast(),
        );
        let mut tar = tar::Builder::new(gz);
        let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serialises");
        let mut header = tar::Header::new_gnu();
        header.set_size(json.len() as u64);
        header.set_mode(0o600);
        header.set_mtime(manifest.created_at.timestamp().max(0) as u64);
        header.set_cksum();
        tar.append_data(&mut header, MANIFEST, json.as_slice())
            .map_err(io_err(output))?;
        tar.append_path_with_name(&dump, DATABASE)
            .map_err(io_err(&dump))?;
        for rel in &files {
            let path = state_dir.join(rel);
            let file = File::open(&path).map_err(io_err(&path))?;
            let meta = file.metadata().map_err(io_err(&path))?;
            let mut header = tar::Header::new_gnu();
            header.set_metadata(&meta);
            // Exactly the size the header gives, even if the file grows meanwhile (a log).
            tar.append_data(
                &mut header,
                Path::new(STATE).join(rel),
                file.take(meta.len()),
            )
            .map_err(io_err(&path))?;
        }
        tar.into_inner()
            .and_then(|gz| gz.finish())
            .map_err(io_err(output))?;
    }
    partial.as_file().sync_all().map_err(io_err(output))?;
    partial.persist(output).map_err(|e| BackupError::Io {
        path: output.to_path_buf(),
        source: e.error,
    })?;
    Ok(manifest)
}

/// A path inside the archive's `state/`, relative and without `..`: anything else is refused.
fn state_path(entry: &Path) -> Option<PathBuf> {
    let rel = entry.strip_prefix(STATE).ok()?;
    let clean = rel.components().all(|c| matches!(c, Component::Normal(_)));
    (clean && !rel.as_os_str().is_empty()).then(|| rel.to_path_buf())
}

/// Restores `archive` into an empty database and an empty (or absent) state directory. The
/// state is unpacked beside its place and moved in only once the database is restored, so a
/// failed restore leaves the state directory as it was.
pub fn restore(
    database_url: &str,
    state_dir: &Path,
    archive: &Path,
) -> Result<Manifest, BackupError> {
    let tables = backup::public_tables(&mut connect(database_url)?)
        .map_err(|e| BackupError::Database(e.to_string()))?;
    if tables > 0 {
        return Err(BackupError::NotFresh(format!(
            "the database already has {tables} table(s); restore needs an empty database \
             (createdb a new one and point DATABASE_URL at it)"
        )));
    }
    let occupied = fs::read_dir(state_dir)
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    if occupied {
        return Err(BackupError::NotFresh(format!(
            "the state directory {} is not empty; restore needs an empty one",
            state_dir.display()
        )));
    }
    let parent = state_dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(io_err(parent))?;
    let staged = tempfile::tempdir_in(parent).map_err(io_err(parent))?;
    let dump = staged.path().join(DATABASE);
    let unpacked = staged.path().join(STATE);
    fs::create_dir(&unpacked).map_err(io_err(&unpacked))?;
    fs::set_permissions(&unpacked, fs::Permissions::from_mode(0o700)).map_err(io_err(&unpacked))?;

    let file = File::open(archive).map_err(io_err(archive))?;
    let mut tar = tar::Archive::new(GzDecoder::new(BufReader::new(file)));
    let mut manifest: Option<Manifest> = None;
    let mut have_dump = false;
    for entry in tar.entries().map_err(io_err(archive))? {
        let mut entry = entry.map_err(io_err(archive))?;
        let path = entry.path().map_err(io_err(archive))?.into_owned();
        if manifest.is_none() {
            if path != Path::new(MANIFEST) {
                return Err(BackupError::Archive(format!(
                    "its first entry is {}",
                    path.display()
                )));
            }
            let mut text = String::new();
            entry.read_to_string(&mut text).map_err(io_err(archive))?;
            let read: Manifest = serde_json::from_str(&text)
                .map_err(|e| BackupError::Archive(format!("manifest: {e}")))?;
            if read.format != FORMAT {
                return Err(BackupError::Archive(format!(
                    "format {} (this controller reads format {FORMAT})",
                    read.format
                )));
            }
            manifest = Some(read);
        } else if path == Path::new(DATABASE) {
            entry.unpack(&dump).map_err(io_err(&dump))?;
            have_dump = true;
        } else if let Some(rel) = state_path(&path) {
            if !entry.header().entry_type().is_file() {
                return Err(BackupError::Archive(format!(
                    "{} is not a file",
                    path.display()
                )));
            }
            let target = unpacked.join(&rel);
            if let Some(dir) = target.parent() {
                fs::create_dir_all(dir).map_err(io_err(dir))?;
            }
            entry.unpack(&target).map_err(io_err(&target))?;
        } else {
            return Err(BackupError::Archive(format!(
                "unexpected entry {}",
                path.display()
            )));
        }
    }
    let manifest = manifest.ok_or_else(|| BackupError::Archive("it is empty".into()))?;
    if !have_dump {
        return Err(BackupError::Archive(format!("it has no {DATABASE}")));
    }

    let mut cmd = pg_command("pg_restore", database_url);
    cmd.args([
        "--no-owner",
        "--no-privileges",
        "--exit-on-error",
        "--single-transaction",
    ])
    .arg(&dump);
    run("pg_restore", cmd)?;
    if state_dir.exists() {
        fs::remove_dir(state_dir).map_err(io_err(state_dir))?;
    }
    fs::rename(&unpacked, state_dir).map_err(io_err(state_dir))?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_under_state_are_unpacked() {
        assert_eq!(
            state_path(Path::new("state/ca.crt")),
            Some(PathBuf::from("ca.crt"))
        );
        assert_eq!(
            state_path(Path::new("state/images/ab.tar.gz")),
            Some(PathBuf::from("images/ab.tar.gz"))
        );
        assert_eq!(state_path(Path::new("state/../etc/passwd")), None);
        assert_eq!(state_path(Path::new("state")), None);
        assert_eq!(state_path(Path::new("other/ca.crt")), None);
        assert_eq!(state_path(Path::new("/state/ca.crt")), None);
    }
}
