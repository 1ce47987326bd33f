//! `seen calc`: sizing questions, answered by `seen_core::sizing`.

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use seen_core::sizing;
use serde_json::{json, Value};

use crate::units::{human_bytes, parse_bytes, parse_count, parse_fpp};

/// Answer Bloom-filter sizing questions: give two of --capacity, --fpp and
/// --memory, or --table.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  # How big is a filter for 1 billion URLs at one false positive in 10,000?
  seen calc --capacity 1e9 --fpp 1e-4

  # What error rate do 10 million items get in 16 MiB?
  seen calc --capacity 10M --memory 16MiB

  # How many items fit in 1 GiB at 0.1%?
  seen calc --memory 1GiB --fpp 0.1%

  # Error rates by bits per item and hash count:
  seen calc --table --max-hashes 8

Five layouts are compared: `blocked` is seen's default (seen dedup,
BF.RESERVE ... LAYOUT BLOCKED): all of an item's bits in one cache line, a
little more memory for one cache miss per operation, sized so that the rate
asked for is the rate measured. `seen-redis` is the blocked layout as the
Redis backend (`seen dedup --redis`) sizes it: fewer hashes for up to 10%
more bits (each hash is work for Redis), in shards of at most 8 MiB whose
size is rounded up to the allocator's size class. `classic` is the textbook
filter at its best hash count. `redisbloom` is what BF.RESERVE makes (and
RedisBloom itself): its own rounding of bits and hashes. `guava` is what
Java's Guava BloomFilter.create makes (and BF.RESERVE ... LAYOUT GUAVA, seen
dedup --format guava): its rate at capacity is Guava's, not always the one
asked for. With --memory, the first four.")]
pub(crate) struct CalcArgs {
    /// Items the filter must hold (e.g. `10M`, `1e9`).
    #[arg(long, value_name = "N", value_parser = parse_count)]
    capacity: Option<u64>,

    /// False-positive rate at that many items (e.g. `1e-4`, `0.01%`).
    #[arg(long, value_name = "RATE", value_parser = parse_fpp)]
    fpp: Option<f64>,

    /// Memory for the bit array (e.g. `512MiB`, `2GB`, `1G`).
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    memory: Option<u64>,

    /// Print error rates for a range of bits per item and hash counts.
    #[arg(long, conflicts_with_all = ["capacity", "fpp", "memory"])]
    table: bool,

    /// With --table: the largest hash count (columns 1 to K).
    #[arg(long, value_name = "K", default_value_t = 8, requires = "table",
          value_parser = clap::value_parser!(u32).range(1..=32))]
    max_hashes: u32,

    /// With --table: the largest bits per item (rows 1 to B).
    #[arg(long, value_name = "B", default_value_t = 32, requires = "table",
          value_parser = clap::value_parser!(u32).range(1..=128))]
    max_bits_per_item: u32,

    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: CalcArgs) -> Result<ExitCode> {
    let value = if args.table {
        table(&args)
    } else {
        match (args.capacity, args.fpp, args.memory) {
            (Some(n), Some(p), None) => size_for(n, p)?,
            (Some(n), None, Some(m)) => rate_for(n, m)?,
            (None, Some(p), Some(m)) => capacity_for(m, p)?,
            (Some(_), Some(_), Some(_)) => {
                bail!("give two of --capacity, --fpp and --memory, not all three: the third follows from the other two")
            }
            _ => bail!(
                "give two of --capacity, --fpp and --memory (e.g. `seen calc --capacity 10M --fpp 1e-4`), or --table"
            ),
        }
    };
    let mut out = io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        print_text(&mut out, &value)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn layout_row(name: &str, bits: u64, bytes: u64, hashes: u32, capacity: u64, fpp: f64) -> Value {
    json!({
        "layout": name,
        "bits": bits,
        "bytes": bytes,
        "hashes": hashes,
        "capacity": capacity,
        "bits_per_item": bits as f64 / capacity.max(1) as f64,
        "fpp": fpp,
    })
}

/// A sizing error in the user's terms.
fn too_big(n: u64, p: f64, e: seen_core::Error) -> anyhow::Error {
    match e.kind() {
        seen_core::ErrorKind::TooLarge { .. } => anyhow!(
            "--capacity {n} at --fpp {p:e}: the filter would be larger than memory can address; ask for fewer items or a higher rate"
        ),
        _ => anyhow!("--capacity {n} --fpp {p:e}: {e}"),
    }
}

/// (capacity, fpp) → size of each layout.
fn size_for(n: u64, p: f64) -> Result<Value> {
    let (cbits, ck) = sizing::classic_size(n, p).map_err(|e| too_big(n, p, e))?;
    let rbits = sizing::redis_bits(n, p).map_err(|e| too_big(n, p, e))?;
    let rk = sizing::redis_hashes(p);
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    match sizing::blocked_size(n, p) {
        Ok((blocks, k)) => match blocks.checked_mul(sizing::BLOCK_BITS) {
            Some(bits) => rows.push(layout_row(
                "blocked",
                bits,
                bits / 8,
                k,
                n,
                sizing::blocked_fpp(blocks, k, n),
            )),
            None => notes.push("blocked layout: too large".to_string()),
        },
        // Very low rates need more hashes than one block can take.
        Err(e) => notes.push(format!("blocked layout: {e}")),
    }
    match seen_redis::Plan::new(n, p, seen_redis::DEFAULT_MAX_SHARD_BYTES) {
        Ok(plan) => rows.push(layout_row(
            "seen-redis",
            plan.blocks() * sizing::BLOCK_BITS,
            plan.shards * plan.shard_bytes(),
            plan.hashes,
            n,
            sizing::blocked_fpp(plan.blocks(), plan.hashes, n),
        )),
        Err(e) => notes.push(format!("seen-redis: {e}")),
    }
    rows.push(layout_row(
        "classic",
        cbits,
        cbits / 8,
        ck,
        n,
        sizing::classic_fpp(cbits, ck, n),
    ));
    rows.push(layout_row(
        "redisbloom",
        rbits,
        rbits / 8,
        rk,
        n,
        sizing::classic_fpp(rbits, rk, n),
    ));
    // What Java's BloomFilter.create makes (and LAYOUT GUAVA, --format guava).
    match sizing::guava_size(n, p) {
        Ok((bits, k)) => rows.push(layout_row(
            "guava",
            bits,
            bits / 8,
            k,
            n,
            sizing::classic_fpp(bits, k, n),
        )),
        Err(e) => notes.push(format!("guava: {e}")),
    }
    Ok(json!({"question": "size", "capacity": n, "fpp": p, "layouts": rows, "notes": notes}))
}

/// A memory size the sizes below can count in bits: at least one block,
/// and at most 2 EiB (past that its bits overflow a `u64`).
fn check_memory(memory: u64) -> Result<()> {
    if memory < 64 {
        bail!("--memory {memory}: a filter needs at least 64 bytes");
    }
    if memory > u64::MAX / 8 {
        bail!(
            "--memory {memory}: at most {} bytes (2 EiB), whose bits a 64-bit count holds",
            u64::MAX / 8
        );
    }
    Ok(())
}

/// (capacity, memory) → error rate of each layout at its best hash count.
fn rate_for(n: u64, memory: u64) -> Result<Value> {
    check_memory(memory)?;
    let blocks = memory / 64;
    let (bk, bp) = (1..=48u32)
        .map(|k| (k, sizing::blocked_fpp(blocks, k, n)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("k range is not empty");
    let bits = (memory * 8) / 64 * 64;
    let opt = ((std::f64::consts::LN_2 * bits as f64 / n as f64).ceil() as u32).clamp(1, 255);
    let (ck, cp) = (1..=opt)
        .map(|k| (k, sizing::classic_fpp(bits, k, n)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("k range is not empty");
    Ok(json!({
        "question": "fpp",
        "capacity": n,
        "memory": memory,
        "layouts": [
            layout_row("blocked", blocks * 512, blocks * 64, bk, n, bp),
            layout_row("classic", bits, bits / 8, ck, n, cp),
        ],
    }))
}

/// (memory, fpp) → items that fit.
fn capacity_for(memory: u64, p: f64) -> Result<Value> {
    check_memory(memory)?;
    let blocks = memory / 64;
    let (bn, bk) = sizing::blocked_capacity(blocks, p).map_err(|e| anyhow!("--fpp {p}: {e}"))?;
    let bits = (memory * 8) / 64 * 64;
    let cn = sizing::classic_capacity(bits, p).map_err(|e| anyhow!("--fpp {p}: {e}"))?;
    let ck =
        ((std::f64::consts::LN_2 * bits as f64 / cn.max(1) as f64).round() as u32).clamp(1, 255);
    Ok(json!({
        "question": "capacity",
        "memory": memory,
        "fpp": p,
        "layouts": [
            layout_row("blocked", blocks * 512, blocks * 64, bk, bn, sizing::blocked_fpp(blocks, bk, bn)),
            layout_row("classic", bits, bits / 8, ck, cn, sizing::classic_fpp(bits, ck, cn)),
        ],
    }))
}

/// Error rates by bits per item (rows) and hashes (columns), classic model,
/// plus the best k and the blocked layout's best rate.
fn table(args: &CalcArgs) -> Value {
    const N: u64 = 1_000_000;
    let rows: Vec<Value> = (1..=args.max_bits_per_item)
        .map(|b| {
            let bits = N * b as u64;
            let rates: Vec<f64> = (1..=args.max_hashes)
                .map(|k| {
                    let x: f64 = 1.0 - (-(k as f64) / b as f64).exp();
                    x.powi(k as i32)
                })
                .collect();
            let best = rates
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .map(|(i, r)| (i as u32 + 1, *r))
                .expect("at least one hash");
            let blocks = bits / 512;
            let blocked = (1..=args.max_hashes)
                .map(|k| (k, sizing::blocked_fpp(blocks.max(1), k, N)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .expect("at least one hash");
            json!({
                "bits_per_item": b,
                "fpp_by_hashes": rates,
                "best_hashes": best.0,
                "best_fpp": best.1,
                "blocked_best_hashes": blocked.0,
                "blocked_best_fpp": blocked.1,
            })
        })
        .collect();
    json!({"question": "table", "max_hashes": args.max_hashes, "rows": rows})
}

fn print_text(out: &mut impl Write, v: &Value) -> io::Result<()> {
    match v["question"].as_str() {
        Some("table") => {
            let kmax = v["max_hashes"].as_u64().unwrap_or(0);
            write!(out, "{:>5}", "m/n")?;
            for k in 1..=kmax {
                write!(out, " {:>9}", format!("k={k}"))?;
            }
            writeln!(out, " {:>6} {:>9} {:>9}", "best k", "blocked", "(k)")?;
            for row in v["rows"].as_array().into_iter().flatten() {
                write!(out, "{:>5}", row["bits_per_item"].to_string())?;
                for r in row["fpp_by_hashes"].as_array().into_iter().flatten() {
                    write!(out, " {:>9}", fmt_fpp(r.as_f64().unwrap_or(f64::NAN)))?;
                }
                writeln!(
                    out,
                    " {:>6} {:>9} {:>9}",
                    row["best_hashes"].to_string(),
                    fmt_fpp(row["blocked_best_fpp"].as_f64().unwrap_or(f64::NAN)),
                    format!("k={}", row["blocked_best_hashes"]),
                )?;
            }
            writeln!(out,
                "\nm/n: bits per item; classic rate (1 - e^(-k n/m))^k by hash count k; blocked: seen's default layout at its best k"
            )?;
        }
        q => {
            match q {
                Some("size") => writeln!(
                    out,
                    "For {} items at a false-positive rate of {}:",
                    v["capacity"],
                    fmt_fpp(v["fpp"].as_f64().unwrap_or(f64::NAN))
                )?,
                Some("fpp") => writeln!(
                    out,
                    "For {} items in {}:",
                    v["capacity"],
                    human_bytes(v["memory"].as_u64().unwrap_or(0))
                )?,
                _ => writeln!(
                    out,
                    "In {} at a false-positive rate of {}:",
                    human_bytes(v["memory"].as_u64().unwrap_or(0)),
                    fmt_fpp(v["fpp"].as_f64().unwrap_or(f64::NAN))
                )?,
            }
            writeln!(
                out,
                "{:<11} {:>14} {:>12} {:>7} {:>14} {:>9} {:>10}",
                "layout", "bits", "memory", "hashes", "capacity", "bits/item", "fpp"
            )?;
            for row in v["layouts"].as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "{:<11} {:>14} {:>12} {:>7} {:>14} {:>9.2} {:>10}",
                    row["layout"].as_str().unwrap_or(""),
                    row["bits"].to_string(),
                    human_bytes(row["bytes"].as_u64().unwrap_or(0)),
                    row["hashes"].to_string(),
                    row["capacity"].to_string(),
                    row["bits_per_item"].as_f64().unwrap_or(f64::NAN),
                    fmt_fpp(row["fpp"].as_f64().unwrap_or(f64::NAN)),
                )?;
            }
            for note in v["notes"].as_array().into_iter().flatten() {
                writeln!(out, "note: {}", note.as_str().unwrap_or(""))?;
            }
        }
    }
    Ok(())
}

fn fmt_fpp(p: f64) -> String {
    format!("{p:.2e}")
}
