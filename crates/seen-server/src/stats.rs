//! The server's counters, as Redis 7 keeps them for `INFO stats`,
//! `commandstats`, `errorstats` and `latencystats`, and the metrics
//! endpoint.
//!
//! Every counter is a relaxed atomic: readers see each one exact, the set
//! of them possibly a moment apart. Commands are counted where they run
//! (one update per command, or per fused run of pipelined commands), so
//! the cost on the hot path is a clock read and a few atomic adds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::latency::LatencyHistogram;

/// Most distinct error prefixes `errorstats` keeps (Redis's limit); errors
/// of other prefixes are counted in `total_error_replies` only.
const MAX_ERROR_PREFIXES: usize = 128;
/// `instantaneous_ops_per_sec` averages this many samples.
const OPS_SAMPLES: usize = 16;

/// The place of a command in the command table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CommandIndex(pub(crate) usize);

/// How a command ended, for its counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Ran and answered without an error.
    Ok,
    /// Refused before it ran (arity, authentication): `rejected_calls`.
    Rejected,
    /// Ran and answered an error: `failed_calls`.
    Failed,
}

/// One command's counters.
#[derive(Default)]
#[repr(align(64))] // one command's counters do not share a cache line with another's
pub(crate) struct CommandCounters {
    calls: AtomicU64,
    nanos: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    latency: LatencyHistogram,
}

/// What `INFO commandstats` and `latencystats` say of one command.
pub(crate) struct CommandReport<'a> {
    pub(crate) name: &'static str,
    pub(crate) calls: u64,
    pub(crate) time: Duration,
    pub(crate) rejected: u64,
    pub(crate) failed: u64,
    pub(crate) latency: &'a LatencyHistogram,
}

/// Commands per second, sampled by the server's clock task.
struct OpsSampler {
    last: Option<(Instant, u64)>,
    rates: [f64; OPS_SAMPLES],
    next: usize,
}

/// Server-wide counters.
pub(crate) struct Stats {
    names: Vec<&'static str>,
    commands: Box<[CommandCounters]>,
    errors: Mutex<BTreeMap<String, u64>>,
    pub(crate) processed: AtomicU64,
    pub(crate) connections: AtomicU64,
    pub(crate) rejected_connections: AtomicU64,
    pub(crate) error_replies: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) net_input: AtomicU64,
    pub(crate) net_output: AtomicU64,
    ops: Mutex<OpsSampler>,
}

impl Stats {
    /// Counters for the commands `names` (the command table's order).
    pub(crate) fn new(names: Vec<&'static str>) -> Stats {
        Stats {
            commands: names.iter().map(|_| CommandCounters::default()).collect(),
            names,
            errors: Mutex::new(BTreeMap::new()),
            processed: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            error_replies: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            net_input: AtomicU64::new(0),
            net_output: AtomicU64::new(0),
            ops: Mutex::new(OpsSampler {
                last: None,
                rates: [0.0; OPS_SAMPLES],
                next: 0,
            }),
        }
    }

    /// Counts `n` calls of a command that took `elapsed` together.
    pub(crate) fn command(&self, cmd: CommandIndex, n: u64, elapsed: Duration, outcome: Outcome) {
        let Some(c) = self.commands.get(cmd.0).filter(|_| n > 0) else {
            return;
        };
        match outcome {
            Outcome::Rejected => {
                c.rejected.fetch_add(n, Ordering::Relaxed);
                return;
            }
            Outcome::Failed => {
                c.failed.fetch_add(n, Ordering::Relaxed);
            }
            Outcome::Ok => {}
        }
        // `total_commands_processed`: the calls that ran, as Redis counts.
        self.processed.fetch_add(n, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        c.calls.fetch_add(n, Ordering::Relaxed);
        c.nanos.fetch_add(nanos, Ordering::Relaxed);
        c.latency.record(Duration::from_nanos(nanos / n.max(1)), n);
    }

    /// Counts an error reply by its prefix (`ERR`, `WRONGTYPE`, ...), the
    /// first word of its text.
    pub(crate) fn error_reply(&self, text: &[u8]) {
        self.error_replies.fetch_add(1, Ordering::Relaxed);
        let prefix = text.split(|&b| b == b' ').next().unwrap_or_default();
        let prefix = String::from_utf8_lossy(prefix);
        let mut errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = errors.get_mut(prefix.as_ref()) {
            *n += 1;
        } else if errors.len() < MAX_ERROR_PREFIXES {
            errors.insert(prefix.into_owned(), 1);
        }
    }

    /// Every command that was called or refused, in table order.
    pub(crate) fn commands(&self) -> Vec<CommandReport<'_>> {
        self.names
            .iter()
            .zip(self.commands.iter())
            .map(|(&name, c)| CommandReport {
                name,
                calls: c.calls.load(Ordering::Relaxed),
                time: Duration::from_nanos(c.nanos.load(Ordering::Relaxed)),
                rejected: c.rejected.load(Ordering::Relaxed),
                failed: c.failed.load(Ordering::Relaxed),
                latency: &c.latency,
            })
            .filter(|r| r.calls + r.rejected + r.failed > 0)
            .collect()
    }

    /// A command's name, by its place in the table.
    pub(crate) fn command_name(&self, cmd: CommandIndex) -> Option<&'static str> {
        self.names.get(cmd.0).copied()
    }

    /// Error replies by prefix.
    pub(crate) fn errors(&self) -> Vec<(String, u64)> {
        let errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        errors.iter().map(|(k, &v)| (k.clone(), v)).collect()
    }

    /// Takes a sample of the command rate (the clock task, ten times a
    /// second).
    pub(crate) fn sample_ops(&self) {
        let now = Instant::now();
        let processed = self.processed.load(Ordering::Relaxed);
        let mut s = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((then, before)) = s.last {
            let secs = now.duration_since(then).as_secs_f64();
            if secs > 0.0 {
                let i = s.next;
                s.rates[i] = processed.saturating_sub(before) as f64 / secs;
                s.next = (i + 1) % OPS_SAMPLES;
            }
        }
        s.last = Some((now, processed));
    }

    /// `instantaneous_ops_per_sec`: the mean of the last samples.
    pub(crate) fn ops_per_sec(&self) -> u64 {
        let s = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        (s.rates.iter().sum::<f64>() / OPS_SAMPLES as f64).round() as u64
    }

    /// `CONFIG RESETSTAT`: every counter back to zero.
    pub(crate) fn reset(&self) {
        for c in self.commands.iter() {
            for a in [&c.calls, &c.nanos, &c.rejected, &c.failed] {
                a.store(0, Ordering::Relaxed);
            }
            c.latency.reset();
        }
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        for a in [
            &self.processed,
            &self.connections,
            &self.rejected_connections,
            &self.error_replies,
            &self.hits,
            &self.misses,
            &self.net_input,
            &self.net_output,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        let mut s = self.ops.lock().unwrap_or_else(|e| e.into_inner());
        s.rates = [0.0; OPS_SAMPLES];
        s.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_failures_refusals_and_errors_are_counted_apart() {
        let s = Stats::new(vec!["bf.add", "ping"]);
        let add = CommandIndex(0);
        s.command(add, 64, Duration::from_micros(640), Outcome::Ok);
        s.command(add, 1, Duration::from_micros(3), Outcome::Failed);
        s.command(add, 1, Duration::ZERO, Outcome::Rejected);
        s.error_reply(b"ERR non scaling filter is full");
        s.error_reply(b"WRONGTYPE Operation against a key");
        s.error_reply(b"ERR wrong number of arguments");
        let r = s.commands();
        assert_eq!(r.len(), 1, "ping was never called");
        assert_eq!(
            (r[0].name, r[0].calls, r[0].rejected, r[0].failed),
            ("bf.add", 65, 1, 1)
        );
        assert_eq!(r[0].time, Duration::from_micros(643));
        assert_eq!(s.processed.load(Ordering::Relaxed), 65);
        assert_eq!(
            s.errors(),
            vec![("ERR".to_string(), 2), ("WRONGTYPE".to_string(), 1)]
        );
        let [p50] = r[0].latency.quantiles([0.5]).unwrap();
        assert!(p50 >= Duration::from_micros(10) && p50 <= Duration::from_micros(12));
        s.reset();
        assert!(s.commands().is_empty() && s.errors().is_empty());
        assert_eq!(s.processed.load(Ordering::Relaxed), 0);
    }
}
