//! Human numbers on the command line: counts (`10M`, `1e9`), sizes
//! (`512MiB`), rates (`0.01%`, `1e-4`), and the reverse for output.

/// A count: `1000`, `10k`, `10M`, `2G` (powers of 1000), `1e9`.
pub(crate) fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G' | 'b' | 'B') => (&t[..t.len() - 1], 1e9),
        Some('t' | 'T') => (&t[..t.len() - 1], 1e12),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a count (examples: 1000, 10M, 1e9)"))?;
    let v = v * mult;
    if !(v.is_finite() && v >= 1.0 && v <= u64::MAX as f64) || v.fract() != 0.0 {
        return Err(format!(
            "'{s}' is not a whole count of at least 1 (examples: 1000, 10M, 1e9)"
        ));
    }
    Ok(v as u64)
}

/// A false-positive rate: `0.001`, `1e-4`, `0.01%`; strictly between 0 and 1.
pub(crate) fn parse_fpp(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, div) = match t.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a rate (examples: 0.001, 1e-4, 0.01%)"))?;
    let v = v / div;
    if !(v > 0.0 && v < 1.0) {
        return Err(format!(
            "'{s}' is out of range: a rate is above 0 and below 1 (100%)"
        ));
    }
    Ok(v)
}

/// A duration: `3600`, `3600s`, `90m`, `12h`, `30d`, `2w`.
pub(crate) fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        "w" => 7.0 * 86_400.0,
        _ => {
            return Err(format!(
                "'{s}' is not a duration (examples: 3600s, 90m, 12h, 30d)"
            ))
        }
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (examples: 3600s, 90m, 12h, 30d)"))?;
    let secs = v * mult;
    if !(secs.is_finite() && (0.001..=100.0 * 365.0 * 86_400.0).contains(&secs)) {
        return Err(format!("'{s}' is out of range: from 1ms to 100 years"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Bytes in binary units: `1.50 MiB`.
pub(crate) fn human_bytes(b: u64) -> String {
    const U: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", U[i])
    }
}

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
    fn counts() {
        assert_eq!(parse_count("1000"), Ok(1000));
        assert_eq!(parse_count("10M"), Ok(10_000_000));
        assert_eq!(parse_count("1e9"), Ok(1_000_000_000));
        assert_eq!(parse_count("2.5k"), Ok(2500));
        for bad in ["x", "-1", "1.5", "0", "", "1e30"] {
            assert!(parse_count(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rates() {
        assert_eq!(parse_fpp("0.001"), Ok(0.001));
        assert_eq!(parse_fpp("1e-4"), Ok(1e-4));
        assert!((parse_fpp("0.01%").unwrap() - 1e-4).abs() < 1e-18);
        for bad in ["0", "1", "100%", "-0.1", "x", "nan"] {
            assert!(parse_fpp(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        use std::time::Duration;
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("3600"), Ok(Duration::from_secs(3600)));
        for bad in ["x", "-1d", "0", "5y", "1e30d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn human() {
        assert_eq!(human_bytes(100), "100 B");
        assert_eq!(human_bytes(3 << 20), "3.00 MiB");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert!(parse_bytes("12 parsecs").is_err());
    }
}
