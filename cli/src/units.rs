//! Sizes as lxc reads and prints them: `4GiB`, `512MiB`, `2GB` in, `80.59MB` out.

use anyhow::{anyhow, bail};

/// Bytes in a size such as `4GiB`, `512MB` or `1073741824`.
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| anyhow!("Invalid size {text:?}: expected e.g. 4GiB or 512MiB"))?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "kB" | "KB" => 1000,
        "MB" => 1000_u64.pow(2),
        "GB" => 1000_u64.pow(3),
        "TB" => 1000_u64.pow(4),
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        other => bail!("Invalid size {text:?}: unknown unit {other:?}"),
    };
    let bytes = (number * factor as f64).round();
    // `as` would saturate a size past u64 silently; say so instead.
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        bail!("Invalid size {text:?}: too large");
    }
    Ok(bytes as u64)
}

/// Bytes in a size that names its unit. A bare number would be bytes, never what was meant
/// for a container (`--memory 4` would ask for 4 bytes, rounded up to 1 MiB), so it is refused.
fn sized(text: &str) -> anyhow::Result<u64> {
    if text.trim().chars().all(|c| c.is_ascii_digit() || c == '.') {
        bail!(
            "Invalid size {text:?}: give a unit, e.g. {}GiB or {}MiB",
            text.trim(),
            text.trim()
        );
    }
    parse_size(text)
}

/// Whole MiB in a size with a unit (rounded up, at least 1).
pub fn mib(text: &str) -> anyhow::Result<u64> {
    Ok(sized(text)?.div_ceil(1 << 20).max(1))
}

/// Whole GiB in a size with a unit (rounded up, at least 1).
pub fn gib(text: &str) -> anyhow::Result<u64> {
    Ok(sized(text)?.div_ceil(1 << 30).max(1))
}

/// lxc's `GetByteSizeString(n, 2)`: decimal units, two decimals.
pub fn byte_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["kB", "MB", "GB", "TB", "PB", "EB"];
    if bytes < 1000 {
        return format!("{bytes}B");
    }
    let mut value = bytes as f64;
    let mut unit = "B";
    for u in UNITS {
        if value < 1000.0 {
            break;
        }
        value /= 1000.0;
        unit = u;
    }
    format!("{value:.2}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in() {
        assert_eq!(parse_size("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert_eq!(mib("512MiB").unwrap(), 512);
        assert_eq!(gib("20GiB").unwrap(), 20);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3XB").is_err());
        let bare = mib("4").unwrap_err().to_string();
        assert!(bare.contains("give a unit"), "{bare}");
        assert!(gib("20").is_err());
    }

    #[test]
    fn sizes_out_like_lxc() {
        assert_eq!(byte_size(80_590_000), "80.59MB");
        assert_eq!(byte_size(999), "999B");
        assert_eq!(byte_size(1_500_000_000), "1.50GB");
    }
}
