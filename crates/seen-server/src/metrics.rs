//! The Prometheus endpoint (`seen serve --metrics 127.0.0.1:9479`, off by
//! default): `GET /metrics` in the Prometheus text format (0.0.4), written
//! by the `prometheus-client` crate from the server's counters at each
//! scrape.
//!
//! Per command: calls, failed and rejected calls, and a latency histogram;
//! errors by prefix; clients, traffic, memory, log; and per filter (label
//! `filter`) its items, capacity, memory, fill, estimated items and error
//! rate now against the one asked. The filters past
//! [`Config::metrics_max_filters`](crate::Config::metrics_max_filters) by
//! name order are summed in `seen_unlisted_*` metrics (counts only). A scrape
//! walks every filter's bits once, as `INFO seen` does.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes as Body;
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::health::{filter_health, FilterHealth};
use crate::state::Shared;

/// The upper bounds of the latency histograms' buckets, in seconds.
const LATENCY_BOUNDS: [f64; 16] = [
    1e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 1.0,
    10.0,
];

/// Writes the server's metrics at each scrape.
struct ServerCollector(Arc<Shared>);

impl std::fmt::Debug for ServerCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerCollector")
    }
}

/// One metric family: its samples, each with its label value.
fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    samples: impl IntoIterator<Item = (String, M)>,
) -> Result<(), std::fmt::Error> {
    let mut samples = samples.into_iter().peekable();
    let Some(first) = samples.peek() else {
        return Ok(());
    };
    let mut metric = encoder.encode_descriptor(name, help, None, first.1.metric_type())?;
    for (value, m) in samples {
        m.encode(metric.encode_family(&[(label, value)])?)?;
    }
    Ok(())
}

/// A metric without labels.
fn single<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    m: M,
) -> Result<(), std::fmt::Error> {
    m.encode(encoder.encode_descriptor(name, help, None, m.metric_type())?)
}

fn gauge(v: f64) -> ConstGauge<f64> {
    ConstGauge::new(v)
}

fn counter(v: u64) -> ConstCounter<u64> {
    ConstCounter::new(v)
}

impl Collector for ServerCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sh = &self.0;
        let s = &sh.stats;
        let commands = s.commands();
        let by_cmd = |f: fn(&crate::stats::CommandReport) -> u64| {
            commands
                .iter()
                .map(move |r| (r.name.to_string(), counter(f(r))))
                .collect::<Vec<_>>()
        };
        family(
            &mut e,
            "seen_commands",
            "Calls of each command that ran.",
            "cmd",
            by_cmd(|r| r.calls),
        )?;
        family(
            &mut e,
            "seen_commands_failed",
            "Calls that answered an error.",
            "cmd",
            by_cmd(|r| r.failed),
        )?;
        family(
            &mut e,
            "seen_commands_rejected",
            "Calls refused before they ran (arity, authentication).",
            "cmd",
            by_cmd(|r| r.rejected),
        )?;
        let mut latency = e.encode_descriptor(
            "seen_command_duration_seconds",
            "Time each command took to run.",
            None,
            MetricType::Histogram,
        )?;
        for r in &commands {
            let bounds_ns = LATENCY_BOUNDS.map(|b| (b * 1e9) as u64);
            let cumulative = r.latency.counts_at_most(&bounds_ns);
            // Calls counted while this was read may be in the buckets and
            // not in `calls` yet: the total is never below a bucket.
            let last = cumulative.last().copied().unwrap_or(0);
            let total = r.calls.max(last);
            // The encoder takes each bucket's own count and adds them up.
            let own = cumulative
                .iter()
                .scan(0, |below, &c| Some(c - std::mem::replace(below, c)))
                .chain([total - last]);
            let buckets: Vec<(f64, u64)> = LATENCY_BOUNDS
                .iter()
                .copied()
                .chain([f64::INFINITY])
                .zip(own)
                .collect();
            latency
                .encode_family(&[("cmd", r.name)])?
                .encode_histogram::<NoLabelSet>(r.time.as_secs_f64(), total, &buckets, None)?;
        }
        family(
            &mut e,
            "seen_errors",
            "Error replies by their prefix.",
            "prefix",
            s.errors().into_iter().map(|(p, n)| (p, counter(n))),
        )?;
        single(
            &mut e,
            "seen_connected_clients",
            "Open connections.",
            gauge(sh.connected.load(Ordering::Relaxed) as f64),
        )?;
        single(
            &mut e,
            "seen_connections_received",
            "Connections accepted.",
            counter(s.connections.load(Ordering::Relaxed)),
        )?;
        single(
            &mut e,
            "seen_net_input_bytes",
            "Bytes read from clients.",
            counter(s.net_input.load(Ordering::Relaxed)),
        )?;
        single(
            &mut e,
            "seen_net_output_bytes",
            "Bytes written to clients.",
            counter(s.net_output.load(Ordering::Relaxed)),
        )?;
        single(
            &mut e,
            "seen_memory_used_bytes",
            "Bytes of all filters.",
            gauge(sh.store.memory_bytes() as f64),
        )?;
        single(
            &mut e,
            "seen_memory_max_bytes",
            "maxmemory: the limit of all filters together.",
            gauge(sh.store.max_memory() as f64),
        )?;
        single(
            &mut e,
            "seen_log_bytes",
            "Log written since the last checkpoint.",
            gauge(sh.store.log_bytes() as f64),
        )?;
        self.filters(&mut e)
    }
}

/// A filter name as a label value: its text, with `\` and any byte that
/// is not UTF-8 as `\xHH`, so that two names never share a label.
fn label_of(name: &[u8]) -> String {
    let mut out = String::new();
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\x5c"),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

impl ServerCollector {
    fn filters(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sh = &self.0;
        let health = filter_health(&sh.store);
        let (listed, unlisted) = health.split_at(health.len().min(sh.config.metrics_max_filters));
        single(e, "seen_filters", "Filters.", gauge(health.len() as f64))?;
        if !unlisted.is_empty() {
            // Summed, without a label that a filter's name could take.
            let sum = |f: fn(&FilterHealth) -> f64| unlisted.iter().map(f).sum::<f64>();
            let sums = [
                (
                    "seen_unlisted_filters",
                    "Filters past --metrics-max-filters.",
                    unlisted.len() as f64,
                ),
                (
                    "seen_unlisted_filter_items",
                    "Their adds that answered new, summed.",
                    sum(|h| h.stats.items as f64),
                ),
                (
                    "seen_unlisted_filter_capacity",
                    "Their capacities, summed.",
                    sum(|h| h.stats.capacity as f64),
                ),
                (
                    "seen_unlisted_filter_memory_bytes",
                    "Their memory, summed.",
                    sum(|h| h.stats.memory_bytes as f64),
                ),
                (
                    "seen_unlisted_filter_estimated_items",
                    "Their estimated items, summed.",
                    sum(|h| h.stats.estimated_items),
                ),
                (
                    "seen_unlisted_filters_over_capacity",
                    "How many of them are over capacity.",
                    sum(|h| f64::from(u8::from(h.over_capacity))),
                ),
            ];
            for (name, help, v) in sums {
                single(e, name, help, gauge(v))?;
            }
        }
        let each = |f: fn(&FilterHealth) -> f64| {
            listed
                .iter()
                .map(move |h| (label_of(&h.name), gauge(f(h))))
                .collect::<Vec<_>>()
        };
        family(
            e,
            "seen_filter_items",
            "Adds that answered new.",
            "filter",
            each(|h| h.stats.items as f64),
        )?;
        family(
            e,
            "seen_filter_capacity",
            "Items the filter was sized for.",
            "filter",
            each(|h| h.stats.capacity as f64),
        )?;
        family(
            e,
            "seen_filter_memory_bytes",
            "Memory of the filter's bits.",
            "filter",
            each(|h| h.stats.memory_bytes as f64),
        )?;
        family(
            e,
            "seen_filter_estimated_items",
            "Distinct items estimated from the bits set.",
            "filter",
            each(|h| h.stats.estimated_items),
        )?;
        family(
            e,
            "seen_filter_over_capacity",
            "1 when the filter holds more than it was sized for.",
            "filter",
            each(|h| f64::from(u8::from(h.over_capacity))),
        )?;
        family(
            e,
            "seen_filter_fill_ratio",
            "Share of the bits set.",
            "filter",
            each(|h| h.stats.fill_ratio),
        )?;
        family(
            e,
            "seen_filter_error_rate",
            "The false-positive rate asked for.",
            "filter",
            each(|h| h.stats.error_rate),
        )?;
        family(
            e,
            "seen_filter_error_rate_now",
            "The false-positive rate now, from the bits set.",
            "filter",
            each(|h| h.stats.current_fpp),
        )
    }
}

/// The text of `/metrics` now.
fn render(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut out, registry)?;
    Ok(out)
}

fn reply(registry: &Registry, req: &Request<hyper::body::Incoming>) -> Response<Full<Body>> {
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => match render(registry) {
            Ok(text) => (
                StatusCode::OK,
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                text,
            ),
            Err(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                "the metrics could not be written\n".to_string(),
            ),
        },
        (_, "/metrics") => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "use GET\n".to_string(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "seen serves its metrics at /metrics\n".to_string(),
        ),
    };
    let mut r = Response::new(Full::new(Body::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    r
}

/// Answers scrapes on `listener` until the server stops.
pub(crate) async fn serve(shared: Arc<Shared>, listener: TcpListener) {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(ServerCollector(shared)));
    let registry = Arc::new(registry);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("metrics: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let registry = registry.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let registry = registry.clone();
                async move {
                    // The scrape walks the filters: off the runtime's
                    // threads' hot path.
                    let r = crate::blocking::blocking(|| reply(&registry, &req));
                    Ok::<_, std::convert::Infallible>(r)
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await
            {
                tracing::debug!("metrics: connection ended: {e}");
            }
        });
    }
}
