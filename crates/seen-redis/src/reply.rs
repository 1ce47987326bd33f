//! Checking Redis's replies: every shape we did not ask for is a
//! [`ErrorKind::BadReply`], never a panic or a silently wrong answer.

use redis::Value;

use crate::error::{ErrorKind, Result};

/// Shows at most a few elements of a reply in a message.
fn shown(v: &Value) -> String {
    let s = format!("{v:?}");
    if s.len() > 120 {
        let mut end = 120;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    } else {
        s
    }
}

fn bad(command: &'static str, key: &str, detail: String) -> crate::Error {
    ErrorKind::BadReply {
        command,
        key: key.to_string(),
        detail,
    }
    .into()
}

/// A BITFIELD reply of `n` one-bit values, each 0 or 1.
pub(crate) fn bits<'a>(
    v: &'a Value,
    n: usize,
    command: &'static str,
    key: &str,
) -> Result<impl Iterator<Item = bool> + 'a> {
    let Value::Array(items) = v else {
        return Err(bad(
            command,
            key,
            format!("expected an array, got {}", shown(v)),
        ));
    };
    if items.len() != n {
        return Err(bad(
            command,
            key,
            format!("expected {n} values, got {}", items.len()),
        ));
    }
    if let Some(odd) = items
        .iter()
        .find(|x| !matches!(x, Value::Int(0) | Value::Int(1)))
    {
        return Err(bad(
            command,
            key,
            format!("expected one-bit values 0 or 1, got {}", shown(odd)),
        ));
    }
    Ok(items.iter().map(|x| matches!(x, Value::Int(1))))
}

/// The add script's reply: the old values of `n` bits as a string of
/// `0` and `1` (see `answers.rs`).
pub(crate) fn bit_string<'a>(
    v: &'a Value,
    n: usize,
    command: &'static str,
    key: &str,
) -> Result<impl Iterator<Item = bool> + 'a> {
    let Value::BulkString(b) = v else {
        return Err(bad(
            command,
            key,
            format!("expected a string of bits, got {}", shown(v)),
        ));
    };
    if b.len() != n || b.iter().any(|&c| c != b'0' && c != b'1') {
        return Err(bad(
            command,
            key,
            format!("expected {n} bits as 0 and 1, got {}", shown(v)),
        ));
    }
    Ok(b.iter().map(|&c| c == b'1'))
}

/// An integer reply.
pub(crate) fn int(v: &Value, command: &'static str, key: &str) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        other => Err(bad(
            command,
            key,
            format!("expected an integer, got {}", shown(other)),
        )),
    }
}

/// A non-negative integer reply.
pub(crate) fn count(v: &Value, command: &'static str, key: &str) -> Result<u64> {
    let i = int(v, command, key)?;
    u64::try_from(i).map_err(|_| bad(command, key, format!("expected a count, got {i}")))
}

/// A bulk string or nil reply (`GET`).
pub(crate) fn bytes_or_nil<'a>(
    v: &'a Value,
    command: &'static str,
    key: &str,
) -> Result<Option<&'a [u8]>> {
    match v {
        Value::Nil => Ok(None),
        Value::BulkString(b) => Ok(Some(b)),
        other => Err(bad(
            command,
            key,
            format!("expected a string or nil, got {}", shown(other)),
        )),
    }
}

/// `OK` (true) or nil (false), as `SET ... NX` answers.
pub(crate) fn ok_or_nil(v: &Value, command: &'static str, key: &str) -> Result<bool> {
    match v {
        Value::Okay => Ok(true),
        Value::SimpleString(s) if s == "OK" => Ok(true),
        Value::Nil => Ok(false),
        other => Err(bad(
            command,
            key,
            format!("expected OK or nil, got {}", shown(other)),
        )),
    }
}

/// A `PTTL` reply: `Some(Some(ms))` with a TTL, `Some(None)` without one,
/// `None` if the key does not exist.
pub(crate) fn pttl(v: &Value, key: &str) -> Result<Option<Option<u64>>> {
    match int(v, "PTTL", key)? {
        -2 => Ok(None),
        -1 => Ok(Some(None)),
        ms if ms >= 0 => Ok(Some(Some(ms as u64))),
        other => Err(bad(
            "PTTL",
            key,
            format!("expected -2, -1 or a TTL, got {other}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitfield_replies() {
        let ok = Value::Array(vec![Value::Int(0), Value::Int(1)]);
        assert_eq!(
            bits(&ok, 2, "BITFIELD", "k").unwrap().collect::<Vec<_>>(),
            [false, true]
        );
        for (v, n, needle) in [
            (ok.clone(), 3, "expected 3 values, got 2"),
            (Value::Int(1), 1, "expected an array"),
            (Value::Array(vec![Value::Int(2)]), 1, "got int(2)"),
            (Value::Array(vec![Value::Nil]), 1, "got nil"),
        ] {
            let e = bits(&v, n, "BITFIELD", "seen:{x:0}:bits")
                .err()
                .expect("an error");
            assert!(e.to_string().contains(needle), "{e}");
            assert!(e.to_string().contains("seen:{x:0}:bits"), "{e}");
        }
    }

    #[test]
    fn scalar_replies() {
        assert_eq!(pttl(&Value::Int(-2), "k").unwrap(), None);
        assert_eq!(pttl(&Value::Int(-1), "k").unwrap(), Some(None));
        assert_eq!(pttl(&Value::Int(5), "k").unwrap(), Some(Some(5)));
        assert!(pttl(&Value::Int(-3), "k").is_err());
        assert!(pttl(&Value::Nil, "k").is_err());
        assert!(count(&Value::Int(-1), "STRLEN", "k").is_err());
        assert!(ok_or_nil(&Value::Okay, "SET", "k").unwrap());
        assert!(!ok_or_nil(&Value::Nil, "SET", "k").unwrap());
        assert!(ok_or_nil(&Value::Int(1), "SET", "k").is_err());
        assert!(bytes_or_nil(&Value::Int(1), "GET", "k").is_err());
        let long = Value::Array(vec![Value::Int(7); 1000]);
        let e = int(&long, "GET", "k").unwrap_err().to_string();
        assert!(e.len() < 300, "{e}");
    }
}
