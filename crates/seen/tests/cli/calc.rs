use serde_json::Value;

use crate::support::*;

fn calc_json(args: &[&str]) -> Value {
    let mut a = vec!["calc", "--json"];
    a.extend_from_slice(args);
    let o = run(&a, b"");
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn layout<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["layouts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["layout"] == name)
        .unwrap_or_else(|| panic!("no {name} in {v}"))
}

#[test]
fn size_for_capacity_and_rate() {
    let v = calc_json(&["--capacity", "10M", "--fpp", "0.01%"]);
    assert_eq!(v["capacity"], 10_000_000);
    let b = layout(&v, "blocked");
    let (blocks, k) = seen_core::sizing::blocked_size(10_000_000, 1e-4).unwrap();
    assert_eq!(b["bits"], blocks * 512);
    assert_eq!(b["bytes"], blocks * 64);
    assert_eq!(b["hashes"], k);
    assert!(b["fpp"].as_f64().unwrap() <= 1e-4);
    // The Redis backend: fewer hashes for at most 10% more bits, then
    // shards rounded up to their allocation size class.
    let r = layout(&v, "seen-redis");
    let plan =
        seen_redis::Plan::new(10_000_000, 1e-4, seen_redis::DEFAULT_MAX_SHARD_BYTES).unwrap();
    assert_eq!(r["hashes"], plan.hashes);
    assert_eq!(r["bits"], plan.blocks() * 512);
    assert_eq!(r["bytes"], plan.shards * plan.shard_bytes());
    assert!(plan.hashes < k && r["fpp"].as_f64().unwrap() <= 1e-4);
    let c = layout(&v, "classic");
    assert!(c["fpp"].as_f64().unwrap() <= 1e-4);
    // About 19.2 bits per item for a classic filter at 1e-4.
    let bpi = c["bits_per_item"].as_f64().unwrap();
    assert!((19.0..19.5).contains(&bpi), "{bpi}");
    let r = layout(&v, "redisbloom");
    assert_eq!(
        r["bits"],
        seen_core::sizing::redis_bits(10_000_000, 1e-4).unwrap()
    );
    assert_eq!(r["hashes"], 14);

    let o = run(&["calc", "--capacity", "1e9", "--fpp", "1e-4"], b"");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("2.61 GiB") && text.contains("blocked"),
        "{text}"
    );
}

#[test]
fn rate_for_capacity_and_memory() {
    let v = calc_json(&["--capacity", "10M", "--memory", "16MiB"]);
    let b = layout(&v, "blocked");
    assert_eq!(b["bytes"], 16 << 20);
    let p = b["fpp"].as_f64().unwrap();
    let k = b["hashes"].as_u64().unwrap() as u32;
    assert_eq!(
        p,
        seen_core::sizing::blocked_fpp((16 << 20) / 64, k, 10_000_000)
    );
    assert!(p > 1e-3 && p < 1e-2, "{p}");
}

#[test]
fn capacity_for_memory_and_rate() {
    let v = calc_json(&["--memory", "1GiB", "--fpp", "0.001"]);
    let b = layout(&v, "blocked");
    let n = b["capacity"].as_u64().unwrap();
    let (expect, _) = seen_core::sizing::blocked_capacity((1 << 30) / 64, 0.001).unwrap();
    assert_eq!(n, expect);
    // Round trip: sizing that capacity at that rate fits in the memory.
    let back = calc_json(&["--capacity", &n.to_string(), "--fpp", "0.001"]);
    assert!(layout(&back, "blocked")["bytes"].as_u64().unwrap() <= 1 << 30);
}

#[test]
fn table_of_rates() {
    let v = calc_json(&["--table", "--max-hashes", "4", "--max-bits-per-item", "10"]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 10);
    // m/n = 8, k = 3: (1 - e^(-3/8))^3 = 0.0306.
    let r = rows[7]["fpp_by_hashes"][2].as_f64().unwrap();
    assert!((r - 0.0306).abs() < 1e-4, "{r}");
    assert_eq!(rows[7]["fpp_by_hashes"].as_array().unwrap().len(), 4);
    let o = run(&["calc", "--table"], b"");
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        text.lines()
            .filter(|l| l.trim_start().starts_with(char::is_numeric))
            .count(),
        32
    );
}

#[test]
fn bad_questions() {
    assert_error(&run(&["calc"], b""), "two of");
    assert_error(&run(&["calc", "--capacity", "10"], b""), "two of");
    assert_error(
        &run(
            &["calc", "--capacity", "10", "--fpp", "0.1", "--memory", "1M"],
            b"",
        ),
        "not all three",
    );
    assert_error(
        &run(&["calc", "--memory", "12 parsecs", "--fpp", "0.1"], b""),
        "parsecs",
    );
    assert_error(
        &run(&["calc", "--memory", "10", "--fpp", "0.1"], b""),
        "64 bytes",
    );
    assert_error(
        &run(&["calc", "--table", "--capacity", "5"], b""),
        "--capacity",
    );
    assert_error(
        &run(&["calc", "--capacity", "1e19", "--fpp", "1e-300"], b""),
        "--capacity",
    );
    // Past 2 EiB the bits overflowed: the rows were nonsense (a blocked
    // filter of 1.26 bits an item at 1%).
    for q in [["--fpp", "0.01"], ["--capacity", "1000"]] {
        assert_error(
            &run(
                &["calc", "--memory", "18446744073709551615", q[0], q[1]],
                b"",
            ),
            "2 EiB",
        );
    }
    // One item at 1e-300: 2 PiB of classic filter was the rounding's.
    let o = run(&["calc", "--capacity", "1", "--fpp", "1e-300"], b"");
    assert_error(&o, "larger than memory can address");
}

/// At rates below about 2^-51 the blocked layout held nothing, in any
/// memory (its range of hash counts was empty).
#[test]
fn tiny_rates_fit_the_blocked_layout_at_48_hashes() {
    let v = calc_json(&["--memory", "1GiB", "--fpp", "1e-17"]);
    let b = layout(&v, "blocked");
    assert_eq!(b["hashes"], 48);
    assert!(b["capacity"].as_u64().unwrap() > 1_000_000, "{v}");
    assert!(b["fpp"].as_f64().unwrap() <= 1e-17, "{v}");
}
