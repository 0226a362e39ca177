//! Whether an upload is an LXD image before it is catalogued: a unified tarball (plain, gzip- or
//! xz-compressed, as `images/build`, `lxc publish`, `lxc image export` and pylxd make them) holding
//! `metadata.yaml` with an `architecture`, and a `rootfs/` tree. A split image (metadata and
//! root filesystem in two files) cannot come in one upload, so it is refused with that reason,
//! as are compressions the controller cannot read.
//!
//! Only tar headers are read (the POSIX ustar layout, GNU long names and pax `path` records),
//! and only until both parts have been seen. Of `metadata.yaml` the check keeps what the catalog
//! records from it: the `cohort.gpu_ready` property ([`ImageFacts`]).

use std::io::{self, BufReader, Read};
use std::path::Path;

/// Why an upload is not an image.
#[derive(Debug, thiserror::Error)]
pub enum ImageFormatError {
    /// not a tar archive at all
    #[error("not an LXD image: {0}")]
    NotImage(String),
    /// a compression the controller does not read
    #[error(
        "{0}-compressed tarballs are not accepted: upload it uncompressed, gzip- or xz-compressed"
    )]
    Compression(&'static str),
    /// reading the upload failed
    #[error("reading the upload: {0}")]
    Io(#[from] io::Error),
}

/// Most bytes of tar stream read while looking for the two parts: a gzip bomb stops here.
const MAX_SCANNED: u64 = 64 << 30;

/// Most bytes of `metadata.yaml` read.
const MAX_METADATA: u64 = 1 << 20;

/// What an image's own metadata says that the catalog records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageFacts {
    /// Its `cohort.gpu_ready` property (`"true"` or `"false"`), where it has one.
    pub gpu_ready: Option<bool>,
}

/// The `cohort.gpu_ready` property in a `metadata.yaml` text (under `properties:`).
fn gpu_ready(metadata: &str) -> Option<bool> {
    metadata.lines().find_map(|l| {
        let value = l.trim().strip_prefix("cohort.gpu_ready:")?;
        match value.trim().trim_matches(|c| c == '"' || c == '\'') {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    })
}

/// Checks the file at `path` (blocking), and returns what its metadata says.
pub fn check(path: &Path) -> Result<ImageFacts, ImageFormatError> {
    let mut magic = [0u8; 6];
    let n = std::fs::File::open(path)?.read(&mut magic)?;
    let file = BufReader::new(std::fs::File::open(path)?);
    match &magic[..n] {
        [0x1f, 0x8b, ..] => scan(flate2::read::MultiGzDecoder::new(file)),
        [0xfd, b'7', b'z', b'X', b'Z', 0] => scan(xz2::read::XzDecoder::new_multi_decoder(file)),
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Err(ImageFormatError::Compression("zstd")),
        [b'B', b'Z', b'h', ..] => Err(ImageFormatError::Compression("bzip2")),
        _ => scan(file),
    }
}

/// Whether `metadata.yaml` names an `architecture` at its top level: as a YAML block key, or in
/// a JSON document (YAML's flow style, which pylxd's own test images write).
fn names_architecture(text: &str) -> bool {
    if text.trim_start().starts_with('{') {
        return serde_json::from_str::<serde_json::Value>(text)
            .is_ok_and(|doc| doc.get("architecture").is_some_and(|a| a.is_string()));
    }
    text.lines().any(|l| l.starts_with("architecture:"))
}

fn not_image(why: impl Into<String>) -> ImageFormatError {
    ImageFormatError::NotImage(why.into())
}

/// Walks the tar headers until `metadata.yaml` (checked) and `rootfs/` have both been seen. A
/// stream that ends early or does not decompress is no image either.
fn scan(stream: impl Read) -> Result<ImageFacts, ImageFormatError> {
    let mut entries = 0u64;
    scan_entries(stream, &mut entries).map_err(|e| match e {
        ImageFormatError::Io(e) if entries == 0 => {
            not_image(format!("the upload is not a tar archive ({e})"))
        }
        ImageFormatError::Io(e) => not_image(format!("the tar archive is damaged ({e})")),
        other => other,
    })
}

fn scan_entries(stream: impl Read, entries: &mut u64) -> Result<ImageFacts, ImageFormatError> {
    let mut stream = stream.take(MAX_SCANNED);
    let mut facts = ImageFacts::default();
    let (mut metadata, mut rootfs) = (false, false);
    let mut long_name: Option<String> = None;
    let mut block = [0u8; 512];
    loop {
        if !read_block(&mut stream, &mut block)? || block.iter().all(|b| *b == 0) {
            break;
        }
        let header = Header::parse(&block).ok_or_else(|| {
            if *entries == 0 {
                not_image("the upload is not a tar archive")
            } else {
                not_image("the tar archive is damaged")
            }
        })?;
        *entries += 1;
        let padded = header.size.div_ceil(512) * 512;
        let name = long_name.take().unwrap_or(header.name);
        match header.kind {
            // GNU long name, and pax extended header: the next entry's real name.
            b'L' => {
                long_name = Some(read_text(&mut stream, header.size, padded)?);
                continue;
            }
            b'x' => {
                let records = read_text(&mut stream, header.size, padded)?;
                long_name = pax_path(&records);
                continue;
            }
            _ => {}
        }
        let name = name.trim_start_matches("./");
        if name == "metadata.yaml" && matches!(header.kind, b'0' | 0) {
            let text = read_text(&mut stream, header.size.min(MAX_METADATA), padded)?;
            if !names_architecture(&text) {
                return Err(not_image("metadata.yaml names no architecture"));
            }
            facts.gpu_ready = gpu_ready(&text);
            metadata = true;
        } else {
            skip(&mut stream, padded)?;
            rootfs |= name == "rootfs" || name.starts_with("rootfs/");
        }
        if metadata && rootfs {
            return Ok(facts);
        }
    }
    match (metadata, rootfs) {
        (false, _) if *entries == 0 => Err(not_image("the tar archive is empty")),
        (false, _) => Err(not_image("the tarball has no metadata.yaml")),
        _ => Err(not_image(
            "the tarball has no rootfs/ (a split image's metadata alone): upload a unified tarball",
        )),
    }
}

/// One tar header's name, size and type.
struct Header {
    name: String,
    size: u64,
    kind: u8,
}

impl Header {
    /// `None` unless the checksum matches: anything else is not a tar header.
    fn parse(block: &[u8; 512]) -> Option<Header> {
        let stored = octal(&block[148..156])?;
        let sum: u64 = block
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u64::from(*b)
                }
            })
            .sum();
        if stored != sum {
            return None;
        }
        let text = |bytes: &[u8]| {
            let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
            String::from_utf8_lossy(&bytes[..end]).into_owned()
        };
        let mut name = text(&block[..100]);
        if &block[257..262] == b"ustar" {
            let prefix = text(&block[345..500]);
            if !prefix.is_empty() {
                name = format!("{prefix}/{name}");
            }
        }
        Some(Header {
            name,
            size: octal(&block[124..136])?,
            kind: block[156],
        })
    }
}

/// A NUL- or space-terminated octal field.
fn octal(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(text, 8).ok()
}

/// The `path` of pax records (`<len> path=<name>\n`).
fn pax_path(records: &str) -> Option<String> {
    records
        .lines()
        .find_map(|r| {
            r.split_once(' ')
                .and_then(|(_, kv)| kv.strip_prefix("path="))
        })
        .map(str::to_string)
}

/// False at a clean end of the stream.
fn read_block(stream: &mut impl Read, block: &mut [u8; 512]) -> io::Result<bool> {
    let mut got = 0;
    while got < block.len() {
        match stream.read(&mut block[got..])? {
            0 if got == 0 => return Ok(false),
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => got += n,
        }
    }
    Ok(true)
}

/// Reads `len` bytes of text out of an entry of `padded` bytes.
fn read_text(stream: &mut impl Read, len: u64, padded: u64) -> io::Result<String> {
    let len = len.min(MAX_METADATA);
    let mut buf = Vec::with_capacity(len as usize);
    stream.by_ref().take(len).read_to_end(&mut buf)?;
    skip(stream, padded - len)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn skip(stream: &mut impl Read, n: u64) -> io::Result<()> {
    let copied = io::copy(&mut stream.by_ref().take(n), &mut io::sink())?;
    if copied < n {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, size: u64, kind: u8) -> [u8; 512] {
        let mut b = [0u8; 512];
        b[..name.len()].copy_from_slice(name.as_bytes());
        b[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
        b[156] = kind;
        b[257..262].copy_from_slice(b"ustar");
        b[148..156].copy_from_slice(b"        ");
        let sum: u64 = b.iter().map(|x| u64::from(*x)).sum();
        b[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        b
    }

    fn tar(entries: &[(&str, &[u8], u8)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, data, kind) in entries {
            out.extend_from_slice(&header(name, data.len() as u64, *kind));
            out.extend_from_slice(data);
            out.resize(out.len().div_ceil(512) * 512, 0);
        }
        out.extend_from_slice(&[0u8; 1024]);
        out
    }

    fn checked(bytes: &[u8]) -> Result<ImageFacts, ImageFormatError> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), bytes).unwrap();
        check(file.path())
    }

    #[test]
    fn unified_tarballs_pass_anything_else_is_refused() {
        let meta: &[u8] = b"architecture: x86_64\ncreation_date: 1\n";
        let good = tar(&[("metadata.yaml", meta, b'0'), ("rootfs/", b"", b'5')]);
        assert!(checked(&good).is_ok());
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &good).unwrap();
        assert!(checked(&gz.finish().unwrap()).is_ok());
        let err = |bytes: &[u8]| checked(bytes).unwrap_err().to_string();
        assert!(err(b"hello, world\n").contains("not a tar archive"));
        assert!(err(&tar(&[("rootfs/", b"", b'5')])).contains("no metadata.yaml"));
        assert!(err(&tar(&[("metadata.yaml", meta, b'0')])).contains("no rootfs/"));
        let bad = tar(&[("metadata.yaml", b"x: 1\n", b'0'), ("rootfs/", b"", b'5')]);
        assert!(err(&bad).contains("no architecture"));
        // metadata.yaml as JSON (YAML's flow style), as pylxd's suite writes it (issue 46).
        let json_meta: &[u8] =
            b"{\n    \"architecture\": \"x86_64\",\n    \"creation_date\": 1\n}\n";
        let flow = tar(&[("metadata.yaml", json_meta, b'0'), ("rootfs/", b"", b'5')]);
        assert!(checked(&flow).is_ok());
        let nested: &[u8] = b"{\"properties\": {\"architecture\": \"x86_64\"}}";
        let nested = tar(&[("metadata.yaml", nested, b'0'), ("rootfs/", b"", b'5')]);
        assert!(err(&nested).contains("no architecture"));
        // xz, as pylxd's own images come (issue 46); a damaged xz stream is no image.
        let mut xz = xz2::write::XzEncoder::new(Vec::new(), 1);
        std::io::Write::write_all(&mut xz, &good).unwrap();
        assert!(checked(&xz.finish().unwrap()).is_ok());
        assert!(err(b"\xfd7zXZ\0rest").contains("not a tar archive"));
        assert!(err(b"\x28\xb5\x2f\xfdrest").contains("zstd-compressed"));
    }

    #[test]
    fn the_gpu_ready_property_is_read_from_the_metadata() {
        let facts = |meta: &[u8]| {
            checked(&tar(&[
                ("metadata.yaml", meta, b'0'),
                ("rootfs/", b"", b'5'),
            ]))
            .unwrap()
            .gpu_ready
        };
        let ready = b"architecture: x86_64\nproperties:\n  cohort.gpu_ready: \"true\"\n";
        assert_eq!(facts(ready), Some(true));
        let not = b"architecture: x86_64\nproperties:\n  cohort.gpu_ready: \"false\"\n";
        assert_eq!(facts(not), Some(false));
        assert_eq!(facts(b"architecture: x86_64\n"), None);
    }
}
