//! Human sizes on the command line: `4096`, `512MiB`, `2GB`.

/// A size in bytes: `4096`, `512MiB`, `2GB`, `1.5G` (`K`/`M`/`G`/`T` alone
/// and `KiB`... are powers of 1024, `KB`, `MB`... of 1000).
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return Err(format!("'{s}' is not a size (examples: 4096, 512MiB, 2GB)")),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 4096, 512MiB, 2GB)"))?;
    let v = v * mult;
    if !(v.is_finite() && v >= 0.0 && v <= u64::MAX as f64) {
        return Err(format!("'{s}' is out of range"));
    }
    Ok(v.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert!(parse_bytes("12 parsecs").is_err());
    }
}
