//! `seen inspect`: what a state file, a snapshot or a Redis filter holds.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use seen_core::{guava, AnyFilter, FilterStats, Layout};
use seen_redis::{RedisFilter, Target};
use serde_json::{json, Map, Value};

use crate::filter_file::{self, Content};
use crate::units::human_bytes;

/// Show a filter's layout, parameters, size, fill, estimated items and
/// error rate now: a state file of `seen dedup --state`, a snapshot of a
/// `seen serve` data directory, a file Guava's `BloomFilter.writeTo`
/// wrote, or a filter in Redis.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  seen inspect urls.seen
  seen inspect ./seen-data/snapshots/00000000000000000001.snap --json
  seen inspect crawl.guava
  seen inspect --redis redis://127.0.0.1:6379 --name crawl-urls
  seen inspect --check urls.seen || echo 'time for a bigger filter'

Exit status: 0, or with --check 1 when the filter is past its capacity (its
error rate now is above the one it was sized for) or, in Redis, has damaged
shards; 2 on any error.")]
pub(crate) struct InspectArgs {
    /// A state file (`seen dedup --state`), a snapshot file
    /// (`<data dir>/snapshots/*.snap`) or a Guava `writeTo` file.
    #[arg(
        value_name = "PATH",
        required_unless_present = "redis",
        conflicts_with = "redis"
    )]
    path: Option<PathBuf>,

    /// Inspect a filter kept in Redis (`redis://host:6379`,
    /// `redis+cluster://host:7000,host:7001`).
    #[arg(long, value_name = "URL", requires = "name")]
    redis: Option<String>,

    /// Name of the filter in Redis (with --redis).
    #[arg(long, value_name = "NAME", requires = "redis")]
    name: Option<String>,

    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,

    /// Exit with 1 when the filter is past its capacity.
    #[arg(long)]
    check: bool,
}

pub(crate) fn run(args: InspectArgs) -> Result<ExitCode> {
    let report = match (&args.path, &args.redis, &args.name) {
        (Some(path), _, _) => inspect_file(path)?,
        (None, Some(url), Some(name)) => inspect_redis(url, name)?,
        _ => bail!("give a PATH, or --redis URL --name NAME"),
    };
    let mut out = io::stdout().lock();
    if args.json {
        let json = serde_json::to_string_pretty(&Value::Object(report.clone()))?;
        writeln!(out, "{json}")?;
    } else {
        print_text(&mut out, &report)?;
    }
    out.flush()?;
    let failing = report["over_capacity"].as_bool().unwrap_or(false)
        || report
            .get("damaged_shards")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            > 0;
    Ok(if args.check && failing {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn inspect_file(path: &Path) -> Result<Map<String, Value>> {
    let Some((f, content)) = filter_file::open_sniffed(path, "file")? else {
        bail!("cannot open '{}': no such file", path.display());
    };
    let file_bytes = f
        .metadata()
        .map_err(|e| anyhow!("cannot read '{}': {e}", path.display()))?
        .len();
    let mut report = Map::new();
    report.insert("file".into(), json!(path.display().to_string()));
    report.insert("file_bytes".into(), json!(file_bytes));
    match content {
        Content::SeenFilter => {
            let filter = filter_file::read_seen(path, f)?;
            report.insert("source".into(), json!("filter file"));
            describe(&filter, &mut report);
        }
        Content::SeenSnapshot => {
            let snap = filter_file::read_snapshot(path)?;
            report.insert("source".into(), json!("seen serve snapshot"));
            report.insert("name".into(), json!(String::from_utf8_lossy(&snap.name)));
            report.insert("lsn".into(), json!(snap.lsn));
            report.insert("expire_at_unix_ms".into(), json!(snap.expire_at_ms));
            describe(&snap.filter, &mut report);
        }
        Content::Guava => {
            let filter = filter_file::read_guava(path, f)?;
            report.insert("source".into(), json!("guava file"));
            let strategy = match filter.layout() {
                Layout::Guava32 => "MURMUR128_MITZ_32",
                _ => "MURMUR128_MITZ_64",
            };
            report.insert("guava_strategy".into(), json!(strategy));
            report.insert(
                "approximate_element_count".into(),
                json!(guava::approximate_element_count(&filter)),
            );
            describe(&AnyFilter::Bloom(filter), &mut report);
            // A Guava file records neither: these are what its bits and
            // hash count are optimal for.
            report.insert(
                "capacity_and_rate".into(),
                json!("implied by size and hashes"),
            );
        }
        Content::Unknown(head, got) => bail!(
            "'{}' is not a seen filter, a snapshot or a Guava filter file (it starts with {:?})",
            path.display(),
            String::from_utf8_lossy(&head[..got])
        ),
    }
    Ok(report)
}

fn lower_debug(x: impl std::fmt::Debug) -> String {
    format!("{x:?}").to_lowercase()
}

fn stats_into(s: &FilterStats, r: &mut Map<String, Value>) {
    r.insert("capacity".into(), json!(s.capacity));
    r.insert("error_rate".into(), json!(s.error_rate));
    r.insert("items".into(), json!(s.items));
    r.insert("bits".into(), json!(s.bits));
    r.insert("bits_set".into(), json!(s.bits_set));
    r.insert("memory_bytes".into(), json!(s.memory_bytes));
    r.insert("fill_ratio".into(), json!(s.fill_ratio));
    r.insert("estimated_items".into(), json!(finite(s.estimated_items)));
    r.insert("current_fpp".into(), json!(s.current_fpp));
}

/// JSON has no infinity: a saturated filter's estimate is null.
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

fn describe(filter: &AnyFilter, r: &mut Map<String, Value>) {
    r.insert("kind".into(), json!(lower_debug(filter.kind())));
    match filter {
        AnyFilter::Bloom(f) => {
            r.insert("layout".into(), json!(lower_debug(f.layout())));
            r.insert("hash".into(), json!(lower_debug(f.hash_algorithm())));
            r.insert("seed".into(), json!(f.seed()));
            r.insert("hashes".into(), json!(f.hashes()));
        }
        AnyFilter::Scalable(f) => {
            r.insert("layout".into(), json!(lower_debug(f.layout())));
            r.insert("hash".into(), json!(lower_debug(f.hash_algorithm())));
            r.insert("seed".into(), json!(f.seed()));
            r.insert("expansion".into(), json!(f.expansion()));
            r.insert("nonscaling".into(), json!(f.is_nonscaling()));
            r.insert("full".into(), json!(f.is_full()));
            let links: Vec<Value> = f
                .link_info()
                .iter()
                .map(|l| json!({"capacity": l.capacity, "error_rate": l.error_rate, "items": l.items, "bytes": l.bytes, "hashes": l.hashes}))
                .collect();
            r.insert("links".into(), Value::Array(links));
        }
        AnyFilter::Counting(f) => {
            r.insert("layout".into(), json!("counting (4-bit counters)"));
            r.insert("hashes".into(), json!(f.hashes()));
            r.insert("seed".into(), json!(f.seed()));
        }
        _ => {}
    }
    let stats = filter.stats();
    stats_into(&stats, r);
    if matches!(filter, AnyFilter::Counting(_)) {
        // A counting filter's "bits" are its counters.
        r.remove("bits");
        r.remove("bits_set");
        r.insert("counters".into(), json!(stats.bits));
    }
    r.insert(
        "over_capacity".into(),
        json!(filter.is_over_capacity(&stats)),
    );
}

fn inspect_redis(url: &str, name: &str) -> Result<Map<String, Value>> {
    let target = Target::parse(url).map_err(|e| anyhow!("--redis: {e}"))?;
    let mut f = RedisFilter::open(&target, name).map_err(|e| anyhow!("redis: {e}"))?;
    let info = f.info().map_err(|e| anyhow!("redis: {e}"))?;
    let m = info.metadata;
    let mut r = Map::new();
    r.insert("source".into(), json!("redis"));
    r.insert("name".into(), json!(info.name));
    r.insert("kind".into(), json!("bloom"));
    r.insert("layout".into(), json!("blocked"));
    r.insert("hash".into(), json!("xxh3_128"));
    r.insert("seed".into(), json!(m.seed));
    r.insert("hashes".into(), json!(m.plan.hashes));
    r.insert("shards".into(), json!(m.plan.shards));
    r.insert("shard_bytes".into(), json!(m.plan.shard_blocks * 64));
    r.insert("created_unix_ms".into(), json!(m.created_unix_ms));
    r.insert("capacity".into(), json!(m.capacity));
    r.insert("error_rate".into(), json!(m.error_rate));
    r.insert("bits".into(), json!(info.bits));
    r.insert("bits_set".into(), json!(info.bits_set));
    r.insert("memory_bytes".into(), json!(info.bytes));
    r.insert("fill_ratio".into(), json!(info.fill_ratio));
    r.insert(
        "estimated_items".into(),
        json!(finite(info.estimated_items)),
    );
    r.insert("current_fpp".into(), json!(info.current_fpp));
    r.insert(
        "over_capacity".into(),
        json!(info.current_fpp > m.error_rate * 1.0001),
    );
    r.insert("damaged_shards".into(), json!(info.damaged_shards));
    r.insert("ttl_seconds".into(), json!(info.ttl.map(|d| d.as_secs())));
    Ok(r)
}

fn print_text(out: &mut impl Write, r: &Map<String, Value>) -> io::Result<()> {
    for (k, v) in r {
        if k == "links" {
            continue;
        }
        let shown = match (k.as_str(), v) {
            ("memory_bytes" | "file_bytes" | "shard_bytes", Value::Number(n)) => {
                format!("{} ({})", n, human_bytes(n.as_u64().unwrap_or(0)))
            }
            ("fill_ratio", Value::Number(n)) => {
                format!("{:.2}%", n.as_f64().unwrap_or(0.0) * 100.0)
            }
            ("estimated_items", Value::Number(n)) => format!("{:.0}", n.as_f64().unwrap_or(0.0)),
            ("estimated_items", Value::Null) => "unknown (every bit is set)".into(),
            ("current_fpp" | "error_rate", Value::Number(n)) => {
                format!("{:.3e}", n.as_f64().unwrap_or(0.0))
            }
            (_, Value::String(s)) => s.clone(),
            (_, Value::Null) => "none".into(),
            (_, v) => v.to_string(),
        };
        writeln!(out, "{:<18} {}", format!("{k}:"), shown)?;
    }
    if let Some(Value::Array(links)) = r.get("links") {
        writeln!(out, "links:")?;
        for (i, l) in links.iter().enumerate() {
            writeln!(
                out,
                "  {i}: capacity {}, error rate {:.3e}, items {}, {}, {} hashes",
                l["capacity"],
                l["error_rate"].as_f64().unwrap_or(0.0),
                l["items"],
                human_bytes(l["bytes"].as_u64().unwrap_or(0)),
                l["hashes"]
            )?;
        }
    }
    Ok(())
}
