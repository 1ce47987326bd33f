//! What an operator watches: `INFO` counters as Redis 7 writes them, read
//! by the real Prometheus exporter for Redis.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{free_port, text, Raw, Server};

/// The value of `field` in one line of `INFO <section>` (`name:...`),
/// e.g. `calls` of `cmdstat_bf.add`.
fn info_item(c: &mut Raw, section: &str, line: &str, field: &str) -> Option<String> {
    let info = text(&c.cmd(&["INFO", section]));
    let rest = info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{line}:")))?
        .trim()
        .to_string();
    rest.split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
        .map(str::to_string)
}

fn count(c: &mut Raw, section: &str, line: &str, field: &str) -> u64 {
    info_item(c, section, line, field)
        .unwrap_or_else(|| panic!("no {line} {field} in INFO {section}"))
        .parse()
        .unwrap()
}

/// Pipelined adds (run fused), single commands, a refused and a failed
/// call and an unknown command land in `commandstats`, `errorstats` and
/// `latencystats` as Redis counts them; `CONFIG RESETSTAT` clears them.
#[test]
fn info_counts_calls_failures_errors_and_latencies_as_redis_7() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("d"), &[]);
    let mut c = server.raw();
    assert_eq!(
        c.cmd(&["BF.RESERVE", "full", "0.01", "2", "NONSCALING"]),
        b"+OK\r\n"
    );
    for i in 0..100 {
        c.send(&["BF.ADD", "k", &format!("item-{i}")]);
    }
    for _ in 0..100 {
        assert_eq!(c.read_reply_bytes().unwrap(), b":1\r\n");
    }
    c.cmd(&["BF.EXISTS", "k", "item-1"]);
    c.cmd(&["BF.ADD", "k"]); // RedisBloom's own arity check: a failed call
    c.cmd(&["GET", "x"]); // unknown: counted in errorstats only
    c.cmd(&["ECHO", "a", "b"]); // arity in the table: a rejected call
    for i in 0..2 {
        assert_eq!(c.cmd(&["BF.ADD", "full", &format!("{i}")]), b":1\r\n");
    }
    assert_eq!(
        c.cmd(&["BF.ADD", "full", "3"]),
        b"-ERR non scaling filter is full\r\n"
    );

    let calls = count(&mut c, "commandstats", "cmdstat_bf.add", "calls");
    assert_eq!(calls, 100 + 1 + 3, "every BF.ADD that ran");
    assert_eq!(
        count(&mut c, "commandstats", "cmdstat_bf.add", "failed_calls"),
        2
    );
    assert_eq!(
        count(&mut c, "commandstats", "cmdstat_echo", "rejected_calls"),
        1
    );
    assert_eq!(count(&mut c, "commandstats", "cmdstat_echo", "calls"), 0);
    assert_eq!(
        count(&mut c, "commandstats", "cmdstat_bf.exists", "calls"),
        1
    );
    let usec = count(&mut c, "commandstats", "cmdstat_bf.add", "usec");
    assert!(usec < 10_000_000, "{usec} us for 104 adds");
    assert_eq!(count(&mut c, "errorstats", "errorstat_ERR", "count"), 4);
    // A BF.MADD whose last item found the filter full answers an array
    // with an error: a failed call, its error counted, alone or pipelined.
    c.cmd(&["BF.MADD", "full", "x", "y"]);
    c.send(&["BF.MADD", "full", "z"]);
    c.send(&["BF.MADD", "full", "w"]);
    c.read_reply_bytes().unwrap();
    c.read_reply_bytes().unwrap();
    assert_eq!(
        count(&mut c, "commandstats", "cmdstat_bf.madd", "failed_calls"),
        3
    );
    assert_eq!(count(&mut c, "errorstats", "errorstat_ERR", "count"), 7);
    let p50: f64 = info_item(
        &mut c,
        "latencystats",
        "latency_percentiles_usec_bf.add",
        "p50",
    )
    .unwrap()
    .parse()
    .unwrap();
    let p999: f64 = info_item(
        &mut c,
        "latencystats",
        "latency_percentiles_usec_bf.add",
        "p99.9",
    )
    .unwrap()
    .parse()
    .unwrap();
    assert!(p50 > 0.0 && p50 <= p999, "p50 {p50} p99.9 {p999}");
    let stats = text(&c.cmd(&["INFO", "stats"]));
    for field in [
        "instantaneous_ops_per_sec:",
        "total_net_input_bytes:",
        "total_net_output_bytes:",
    ] {
        assert!(stats.contains(field), "{field} in {stats}");
    }
    // The default sections leave the per-command ones out, as Redis does.
    let default = text(&c.cmd(&["INFO"]));
    assert!(default.contains("# Errorstats") && !default.contains("# Commandstats"));

    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
    assert!(info_item(&mut c, "commandstats", "cmdstat_bf.add", "calls").is_none());
    assert!(info_item(&mut c, "errorstats", "errorstat_ERR", "count").is_none());
}

/// `BF.INFO key HEALTH` and `INFO seen` tell a filter's fill, estimated
/// items and error rate now, and which filters are past their capacity.
#[test]
fn filter_health_in_bf_info_and_info_seen() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("d"), &[]);
    let mut c = server.raw();
    assert_eq!(c.cmd(&["BF.RESERVE", "ok", "0.01", "1000"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&[
            "BF.RESERVE",
            "over",
            "0.01",
            "100",
            "NONSCALING",
            "LAYOUT",
            "BLOCKED"
        ]),
        b"+OK\r\n"
    );
    for i in 0..500 {
        c.send(&["BF.ADD", "ok", &format!("a{i}")]);
        c.send(&["BF.ADD", "over", &format!("a{i}")]);
    }
    for _ in 0..1000 {
        c.read_reply_bytes().unwrap();
    }
    let ok = health_of(&mut c, "ok");
    assert_eq!(ok["Capacity"], 1000.0);
    assert_eq!(ok["Number of items inserted"], 500.0);
    assert!((ok["Estimated items"] - 500.0).abs() < 25.0, "{ok:?}");
    assert!(
        ok["Error rate now"] < 0.01 && ok["Over capacity"] == 0.0,
        "{ok:?}"
    );
    assert!(ok["Fill ratio"] > 0.1 && ok["Fill ratio"] < 0.6, "{ok:?}");
    // A non-scaling filter refuses adds past its 100 items: full, and so
    // over its capacity, its rate now still within the one asked.
    let over = health_of(&mut c, "over");
    assert_eq!(over["Number of items inserted"], 100.0);
    assert_eq!(over["Over capacity"], 1.0, "{over:?}");
    let seen = text(&c.cmd(&["INFO", "seen"]));
    assert!(
        seen.contains("filters:2\r\nfilters_over_capacity:1\r\n"),
        "{seen}"
    );
    assert!(
        seen.contains("filter:name=over,kind=bloom,")
            || seen.contains("filter:name=over,kind=scalable,"),
        "{seen}"
    );
    assert!(!text(&c.cmd(&["INFO", "all"])).contains("# Seen"));
    assert_eq!(c.cmd(&["BF.INFO", "nope", "HEALTH"]), b"-ERR not found\r\n");
}

/// A `prometheus-redis-exporter` process, stopped by its pid on drop.
struct Exporter {
    child: Child,
    port: u16,
}

impl Exporter {
    fn start(redis_port: u16) -> Exporter {
        let port = free_port();
        let child = Command::new("prometheus-redis-exporter")
            .arg("-redis.addr")
            .arg(format!("redis://127.0.0.1:{redis_port}"))
            .arg("-web.listen-address")
            .arg(format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "prometheus-redis-exporter is not installed: run the tests with \
                 scripts/test, which installs it",
            );
        Exporter { child, port }
    }

    /// The text of `/metrics`, once the exporter answers.
    fn scrape(&self) -> String {
        scrape(self.port)
    }
}

/// `GET /metrics` on `port` (retried until something answers): the body
/// of a 200 reply.
fn scrape(port: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let request = format!("GET /metrics HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
            let mut response = String::new();
            if s.write_all(request.as_bytes()).is_ok() && s.read_to_string(&mut response).is_ok() {
                if let Some((head, body)) = response.split_once("\r\n\r\n") {
                    assert!(
                        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
                        "{head}"
                    );
                    return body.to_string();
                }
            }
        }
        assert!(Instant::now() < deadline, "nothing answered on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        // SAFETY: kill only sends a signal to the exporter's own pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// The value of a sample of `/metrics` (`name{labels} value`).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.trim().parse().unwrap())
}

#[test]
fn the_prometheus_exporter_for_redis_reads_seen() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("d"), &[]);
    let mut c = server.raw();
    for i in 0..250 {
        c.send(&["BF.ADD", "urls", &format!("https://example.com/{i}")]);
    }
    for _ in 0..250 {
        assert_eq!(c.read_reply_bytes().unwrap(), b":1\r\n");
    }
    c.cmd(&["BF.ADD", "other", "x"]);
    let exporter = Exporter::start(server.port);
    let m = exporter.scrape();
    assert_eq!(sample(&m, "redis_up"), Some(1.0), "{m}");
    assert_eq!(
        sample(&m, "redis_commands_total{cmd=\"bf.add\"}"),
        Some(251.0),
        "{m}"
    );
    let secs = sample(&m, "redis_commands_duration_seconds_total{cmd=\"bf.add\"}");
    assert!(secs.is_some_and(|s| s > 0.0 && s < 10.0), "{secs:?}");
    assert_eq!(sample(&m, "redis_db_keys{db=\"db0\"}"), Some(2.0));
    let used = sample(&m, "redis_memory_used_bytes").unwrap();
    assert!(used >= 2.0 * 64.0, "{used}");
    assert!(
        sample(&m, "redis_latency_percentiles_usec_count{cmd=\"bf.add\"}") == Some(251.0),
        "{m}"
    );
}

/// `BF.INFO key HEALTH` as a map of numbers.
fn health_of(c: &mut Raw, key: &str) -> BTreeMap<String, f64> {
    c.send(&["BF.INFO", key, "HEALTH"]);
    let seen_resp::Reply::Array(items) = c.read_reply() else {
        panic!("RESP2 maps are arrays")
    };
    items
        .chunks(2)
        .map(|p| match (&p[0], &p[1]) {
            (seen_resp::Reply::Simple(k), seen_resp::Reply::Integer(v)) => (text(k), *v as f64),
            (seen_resp::Reply::Simple(k), seen_resp::Reply::Bulk(v)) => {
                (text(k), text(v).parse().unwrap())
            }
            other => panic!("{other:?}"),
        })
        .collect()
}

/// `seen serve --metrics`: what `/metrics` serves passes `promtool check
/// metrics`, counts the commands, and tells each filter's fill and error
/// rate now as `BF.INFO key HEALTH` does; past `--metrics-max-filters`
/// the filters are summed in `seen_unlisted_*`.
#[test]
fn the_metrics_endpoint_passes_promtool_and_agrees_with_bf_info() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let server = Server::start(
        &dir.path().join("d"),
        &["--metrics", &addr, "--metrics-max-filters", "2"],
    );
    let mut c = server.raw();
    for (name, n) in [("a-urls", 300), ("b-titles", 700), ("c-spam", 50)] {
        assert_eq!(c.cmd(&["BF.RESERVE", name, "0.01", "1000"]), b"+OK\r\n");
        for i in 0..n {
            c.send(&["BF.ADD", name, &format!("{name}-{i}")]);
        }
        for _ in 0..n {
            assert_eq!(c.read_reply_bytes().unwrap(), b":1\r\n");
        }
    }
    let m = scrape(port);
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is not installed: run the tests with scripts/test, which installs it");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(m.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{m}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(
        sample(&m, "seen_commands_total{cmd=\"bf.add\"}"),
        Some(1050.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "seen_command_duration_seconds_count{cmd=\"bf.add\"}"),
        Some(1050.0)
    );
    assert_eq!(sample(&m, "seen_filters"), Some(3.0));
    for name in ["a-urls", "b-titles"] {
        let h = health_of(&mut c, name);
        let at = |metric: &str| {
            sample(&m, &format!("{metric}{{filter=\"{name}\"}}"))
                .unwrap_or_else(|| panic!("{metric} of {name}"))
        };
        assert_eq!(at("seen_filter_items"), h["Number of items inserted"]);
        assert_eq!(at("seen_filter_capacity"), h["Capacity"]);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-300);
        assert!(
            close(at("seen_filter_fill_ratio"), h["Fill ratio"]),
            "{name}"
        );
        assert!(
            close(at("seen_filter_error_rate_now"), h["Error rate now"]),
            "{name}"
        );
        assert!(close(at("seen_filter_error_rate"), 0.01));
        assert_eq!(at("seen_filter_over_capacity"), h["Over capacity"]);
    }
    // The third filter by name is summed in the seen_unlisted_* metrics.
    assert_eq!(sample(&m, "seen_unlisted_filters"), Some(1.0));
    assert_eq!(sample(&m, "seen_unlisted_filter_items"), Some(50.0));
    assert_eq!(sample(&m, "seen_filter_items{filter=\"c-spam\"}"), None);
}
