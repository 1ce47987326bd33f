//! RedisBloom's module settings, `bf-error-rate`, `bf-initial-size` and
//! `bf-expansion-factor`: the error rate, capacity and expansion that
//! `BF.ADD`, `BF.MADD` and `BF.INSERT` give a filter they create, and the
//! expansion of a `BF.RESERVE` without `EXPANSION` (0: not scaling).
//!
//! `seen serve --bf-error-rate 0.001` sets one at start, `CONFIG SET
//! bf-error-rate 0.001` while running, with RedisBloom's names, ranges,
//! parsing and error texts (its `src/config.c`); `CONFIG GET` shows each as
//! it was given. An error rate above 0.25 is taken as 0.25, as RedisBloom
//! takes it.

use crate::args::{parse_f64, parse_i64};

/// RedisBloom's cap on an error rate.
const ERROR_RATE_CAP: f64 = 0.25;
/// The largest initial size RedisBloom takes (2^30).
const MAX_INITIAL_SIZE: i64 = 1 << 30;
/// The largest expansion RedisBloom takes.
const MAX_EXPANSION: i64 = 32_768;

/// One of the three settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BfSetting {
    /// `bf-error-rate`.
    ErrorRate,
    /// `bf-initial-size`.
    InitialSize,
    /// `bf-expansion-factor`.
    ExpansionFactor,
}

impl BfSetting {
    /// All three, in the order `CONFIG GET` lists them.
    pub const ALL: [BfSetting; 3] = [
        BfSetting::ErrorRate,
        BfSetting::InitialSize,
        BfSetting::ExpansionFactor,
    ];

    /// Its name, RedisBloom's.
    pub fn name(self) -> &'static str {
        match self {
            BfSetting::ErrorRate => "bf-error-rate",
            BfSetting::InitialSize => "bf-initial-size",
            BfSetting::ExpansionFactor => "bf-expansion-factor",
        }
    }

    /// The setting of a name (any case), if it is one.
    pub fn named(name: &[u8]) -> Option<BfSetting> {
        Self::ALL
            .into_iter()
            .find(|s| name.eq_ignore_ascii_case(s.name().as_bytes()))
    }
}

/// The three settings' values, each with the text it was given as.
#[derive(Clone, Debug, PartialEq)]
pub struct BfDefaults {
    error_rate: f64,
    initial_size: u64,
    expansion: u32,
    /// What `CONFIG GET` shows, by [`BfSetting::ALL`]'s order.
    texts: [String; 3],
}

impl Default for BfDefaults {
    /// RedisBloom's: 0.01, 100, 2.
    fn default() -> Self {
        BfDefaults {
            error_rate: 0.01,
            initial_size: 100,
            expansion: 2,
            texts: ["0.01".into(), "100".into(), "2".into()],
        }
    }
}

impl BfDefaults {
    /// The error rate of a filter `BF.ADD` creates.
    pub fn error_rate(&self) -> f64 {
        self.error_rate
    }

    /// The capacity of a filter `BF.ADD` creates.
    pub fn initial_size(&self) -> u64 {
        self.initial_size
    }

    /// The expansion of a filter `BF.ADD` creates, and of a `BF.RESERVE`
    /// without `EXPANSION`; 0 makes them not scale.
    pub fn expansion(&self) -> u32 {
        self.expansion
    }

    /// A setting's value as `CONFIG GET` shows it.
    pub fn text(&self, which: BfSetting) -> &str {
        &self.texts[which as usize]
    }

    /// Sets `which` from `value` with RedisBloom's parsing and range; on
    /// refusal, RedisBloom's reason (which `CONFIG SET` puts after
    /// "CONFIG SET failed (possibly related to argument ...) - ").
    pub fn set(&mut self, which: BfSetting, value: &[u8]) -> Result<(), String> {
        let name = which.name();
        let invalid = || format!("Invalid value for `{name}`");
        let mut text = String::from_utf8_lossy(value).into_owned();
        match which {
            BfSetting::ErrorRate => {
                let v = parse_f64(value).ok_or_else(invalid)?;
                if !(v > 0.0 && v < 1.0) {
                    return Err(format!(
                        "Value for `{name}` must be in the range (0.000000, 1.000000)"
                    ));
                }
                if v > ERROR_RATE_CAP {
                    text = "0.25".into();
                }
                self.error_rate = v.min(ERROR_RATE_CAP);
            }
            BfSetting::InitialSize => {
                let v = parse_i64(value).ok_or_else(invalid)?;
                if !(1..=MAX_INITIAL_SIZE).contains(&v) {
                    return Err(format!(
                        "Value for `{name}` must be in the range [1, {MAX_INITIAL_SIZE}]"
                    ));
                }
                self.initial_size = v as u64;
            }
            BfSetting::ExpansionFactor => {
                let v = parse_i64(value).ok_or_else(invalid)?;
                if !(0..=MAX_EXPANSION).contains(&v) {
                    return Err(format!(
                        "Value for `{name}` must be in the range [0, {MAX_EXPANSION}]"
                    ));
                }
                self.expansion = v as u32;
            }
        }
        self.texts[which as usize] = text;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_texts_are_redisblooms() {
        let mut d = BfDefaults::default();
        let refused = |d: &mut BfDefaults, s, v: &str| d.set(s, v.as_bytes()).unwrap_err();
        for v in ["0", "1", "1.5", "-1", "inf"] {
            assert_eq!(
                refused(&mut d, BfSetting::ErrorRate, v),
                "Value for `bf-error-rate` must be in the range (0.000000, 1.000000)"
            );
        }
        for v in ["abc", "nan", "", " 0.1", "0.1 ", "1e400"] {
            assert_eq!(
                refused(&mut d, BfSetting::ErrorRate, v),
                "Invalid value for `bf-error-rate`"
            );
        }
        d.set(BfSetting::ErrorRate, b"0.5").unwrap();
        assert_eq!(
            (d.error_rate(), d.text(BfSetting::ErrorRate)),
            (0.25, "0.25")
        );
        d.set(BfSetting::ErrorRate, b"0.050").unwrap();
        assert_eq!(
            (d.error_rate(), d.text(BfSetting::ErrorRate)),
            (0.05, "0.050")
        );
        for v in ["0", "-5", "1073741825", "9223372036854775807"] {
            assert_eq!(
                refused(&mut d, BfSetting::InitialSize, v),
                "Value for `bf-initial-size` must be in the range [1, 1073741824]"
            );
        }
        for v in ["abc", "9223372036854775808", "1e3", "1.5", "+5", "0100"] {
            assert_eq!(
                refused(&mut d, BfSetting::InitialSize, v),
                "Invalid value for `bf-initial-size`"
            );
        }
        d.set(BfSetting::InitialSize, b"1073741824").unwrap();
        assert_eq!(d.initial_size(), 1 << 30);
        for v in ["32769", "-1"] {
            assert_eq!(
                refused(&mut d, BfSetting::ExpansionFactor, v),
                "Value for `bf-expansion-factor` must be in the range [0, 32768]"
            );
        }
        d.set(BfSetting::ExpansionFactor, b"0").unwrap();
        assert_eq!(d.expansion(), 0);
        assert_eq!(
            BfSetting::named(b"BF-Initial-Size"),
            Some(BfSetting::InitialSize)
        );
    }
}
