//! The check a pushed dataset passes before it is kept: a plain tar whose every entry stays
//! inside the dataset. No absolute path, no `..` that climbs out, no link (symbolic or hard)
//! that leads outside, nothing but files, directories and links (no devices, no fifos). Read
//! entry by entry from the stored upload, never whole in memory.

use std::path::{Component, Path, PathBuf};

/// Why a tarball is refused.
#[derive(Debug, thiserror::Error)]
pub enum DatasetTarError {
    /// not a tar archive, or a damaged one
    #[error("not a readable tar archive: {0}")]
    Unreadable(std::io::Error),
    /// an entry that would land or point outside the dataset
    #[error("entry {entry:?}: {why}")]
    Escapes { entry: String, why: String },
    /// an entry of a kind a dataset may not hold
    #[error("entry {entry:?} is a {kind}; a dataset holds files, directories and links only")]
    Kind { entry: String, kind: String },
    /// an empty archive
    #[error("the tarball holds no entries")]
    Empty,
}

/// `path` made lexically normal, relative to the dataset's root; `None` when it climbs out or
/// is absolute.
fn inside(base: &Path, path: &Path) -> Option<PathBuf> {
    let mut out = base.to_path_buf();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Checks every entry of the tar at `path`; the number of entries.
pub fn check(path: &Path) -> Result<u64, DatasetTarError> {
    let file = std::fs::File::open(path).map_err(DatasetTarError::Unreadable)?;
    let mut archive = tar::Archive::new(std::io::BufReader::new(file));
    let mut count = 0;
    for entry in archive
        .entries_with_seek()
        .map_err(DatasetTarError::Unreadable)?
    {
        let entry = entry.map_err(DatasetTarError::Unreadable)?;
        let name = entry
            .path()
            .map_err(DatasetTarError::Unreadable)?
            .into_owned();
        let shown = name.display().to_string();
        let escapes = |why: &str| DatasetTarError::Escapes {
            entry: shown.clone(),
            why: why.to_string(),
        };
        let Some(at) = inside(Path::new(""), &name) else {
            return Err(escapes("its path leads outside the dataset"));
        };
        let kind = entry.header().entry_type();
        match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::Directory => {}
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(DatasetTarError::Unreadable)?
                    .unwrap_or_default();
                let from = at.parent().unwrap_or(Path::new(""));
                if target.is_absolute() || inside(from, &target).is_none() {
                    return Err(escapes(&format!(
                        "a link to {} leads outside the dataset",
                        target.display()
                    )));
                }
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name()
                    .map_err(DatasetTarError::Unreadable)?
                    .unwrap_or_default();
                if target.is_absolute() || inside(Path::new(""), &target).is_none() {
                    return Err(escapes(&format!(
                        "a hard link to {} leads outside the dataset",
                        target.display()
                    )));
                }
            }
            // Extended headers are read by the tar crate into the entries they describe.
            tar::EntryType::XGlobalHeader
            | tar::EntryType::XHeader
            | tar::EntryType::GNULongName
            | tar::EntryType::GNULongLink => continue,
            other => {
                return Err(DatasetTarError::Kind {
                    entry: shown,
                    kind: format!("{other:?}").to_lowercase(),
                })
            }
        }
        count += 1;
    }
    if count == 0 {
        return Err(DatasetTarError::Empty);
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_links_that_climb_out_are_caught() {
        assert!(inside(Path::new(""), Path::new("a/../b")).is_some());
        assert!(inside(Path::new(""), Path::new("../b")).is_none());
        assert!(inside(Path::new(""), Path::new("/etc")).is_none());
        assert!(inside(Path::new("a"), Path::new("../b")).is_some());
        assert!(inside(Path::new("a"), Path::new("../../b")).is_none());
    }
}
