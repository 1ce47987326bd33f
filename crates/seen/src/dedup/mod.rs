//! `seen dedup`: print each line the first time it is seen.
//!
//! Input is read in large chunks and split on the separator with `memchr`;
//! the records of a chunk are hashed first, then added to the filter with
//! the filter's lines prefetched a few records ahead, so the cost per line
//! is a hash and (mostly hidden) one cache miss. Memory is the filter plus
//! one chunk buffer, whatever the input size.

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::filter_file::FileFormat;
use crate::units::{parse_count, parse_duration, parse_fpp};

mod backend;

use backend::{open_backend, save_state, Backend};

/// Capacity when `--capacity` is not given and no state file exists.
const DEFAULT_CAPACITY: u64 = 10_000_000;
/// Error rate when `--fpp` is not given and no state file exists.
const DEFAULT_FPP: f64 = 1e-4;
/// Bytes read from the input at a time (a chunk grows for longer lines).
const CHUNK: usize = 1 << 20;
/// How long one `WAIT` for --redis-wait replicas may take before the batch
/// is tried again (within --redis-retry).
const REDIS_WAIT_TIMEOUT: Duration = Duration::from_secs(1);

/// Print each line of the input the first time it is seen, in input order.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  # Unique URLs of a crawl frontier, resumed across runs:
  seen dedup --capacity 100M --fpp 1e-4 --state urls.seen new-urls.txt > to-fetch.txt

  # Many machines deduplicating against one filter in Redis:
  seen dedup --redis redis://cache:6379 --name crawl-urls --capacity 1e9 urls.txt

  # A filter a Java service keeps with Guava's BloomFilter.writeTo:
  seen dedup --state seen-urls.guava --format guava new-urls.txt > to-fetch.txt

  # How many duplicates are there?
  seen dedup --print-dups --count titles.txt

A line is everything up to the newline (or NUL with -z), without it; a last
line without a newline is printed with one. A line may be reported as seen
when it was not (a false positive, at the rate --fpp while the filter holds
at most --capacity lines); a line already printed is never printed again.

With --redis, every process sharing the filter prints each line at most
once between them, and under faults:
  reply lost, connection dropped       exact (retries get recorded answers)
  Redis restarted, appendfsync always  exact
  Redis restarted, weaker persistence  lines of lost writes printed again
  Cluster failover, --redis-wait 1     exact
  Cluster failover, no --redis-wait    lines of unreplicated writes printed again
  Redis down longer than --redis-retry exit 2; lines sent with no answer are
                                       printed (and may be printed again by a
                                       rerun); the count is on stderr
No fault makes a line go unprinted by every run.

Exit status: 0 when the input was read to its end (also when the reader of
the output went away, as in `seen dedup | head`), 2 on any error. The state
file is written only at the end of a complete run, atomically: after an
error, an interrupt or a closed output it is exactly as it was.")]
pub(crate) struct DedupArgs {
    /// Input files, read in order; `-` or none at all reads standard input.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,

    /// Records end with NUL instead of newline (for `find -print0` and
    /// `xargs -0`); the output uses NUL too.
    #[arg(short = 'z', long = "null")]
    null: bool,

    /// Distinct lines the filter is sized for (e.g. `10M`, `1e9`, `250000`).
    /// Past it the false-positive rate climbs above --fpp and seen warns.
    /// Default 10M. Ignored (with a warning) when the state file or the
    /// Redis filter already exists.
    #[arg(long, value_name = "N", value_parser = parse_count)]
    capacity: Option<u64>,

    /// Rate of new lines wrongly taken for duplicates while the filter holds
    /// at most --capacity lines (e.g. `1e-4`, `0.001`, `0.01%`). Default 1e-4.
    #[arg(long, value_name = "RATE", value_parser = parse_fpp)]
    fpp: Option<f64>,

    /// Load the filter from this file if it exists, and save it back at the
    /// end, so the next run skips every line this one saw (e.g.
    /// `--state urls.seen`).
    #[arg(long, value_name = "PATH", conflicts_with = "redis")]
    state: Option<PathBuf>,

    /// The --state file's format: `seen` (the default) or `guava`, the file
    /// Java's Guava `BloomFilter.writeTo` writes (strings hashed as
    /// `Funnels.stringFunnel(UTF_8)` hashes them). A Guava state file is
    /// read, added to and written back in Guava's format; a new one is
    /// sized as Guava's `BloomFilter.create` sizes it.
    #[arg(long, value_enum, value_name = "FORMAT", requires = "state")]
    format: Option<FileFormat>,

    /// Use a filter kept in Redis, shared with every other process using
    /// the same --name: `redis://host:6379`, `rediss://...`, or
    /// `redis+cluster://host1:7000,host2:7001` for a Redis Cluster. No
    /// Redis module is needed.
    #[arg(long, value_name = "URL", requires = "name")]
    redis: Option<String>,

    /// Name of the shared filter in Redis (with --redis), e.g. `crawl-urls`.
    #[arg(long, value_name = "NAME", requires = "redis")]
    name: Option<String>,

    /// With --redis: when a new filter is created, Redis drops it this long
    /// after creation (`30d`, `12h`, `90m`, `3600s`), as a crawler that
    /// forgets what it fetched after a month. An existing filter keeps its
    /// own expiry.
    #[arg(long, value_name = "DURATION", requires = "redis", value_parser = parse_duration)]
    ttl: Option<Duration>,

    /// With --redis: lines sent to Redis per round trip.
    #[arg(long, value_name = "N", default_value_t = 10_000, requires = "redis",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    batch: u64,

    /// With --redis: how long one outage of Redis may last before the run
    /// gives up with exit 2 (a batch that gets through starts the count
    /// again; a batch is given up after 5 minutes of retries in any case).
    #[arg(long, value_name = "DURATION", default_value = "30s", requires = "redis",
          value_parser = parse_duration)]
    redis_retry: Duration,

    /// With --redis: answer a batch only once N replicas hold its writes
    /// (Redis `WAIT`), so that a failover loses no answered write and no
    /// line is printed twice. 0 (the default) does not wait.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "redis")]
    redis_wait: u32,

    /// Print the lines seen before (the duplicates) instead of the new ones.
    #[arg(long)]
    print_dups: bool,

    /// Look lines up without adding them: the filter (and the state file)
    /// stays as it was. With --print-dups this prints the lines that are in
    /// the filter, e.g. a blacklist check:
    /// `seen dedup --state blacklist.seen --read-only --print-dups < candidates`.
    #[arg(long)]
    read_only: bool,

    /// Print only the number of lines that would have been printed.
    #[arg(short = 'c', long)]
    count: bool,

    /// At the end, print a summary on stderr: lines in, unique out,
    /// estimated false positives, throughput.
    #[arg(short = 'v', long)]
    verbose: bool,

    /// Progress bar on stderr: `auto` shows it when stderr is a terminal.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto, value_name = "WHEN")]
    progress: ProgressMode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProgressMode {
    Auto,
    Always,
    Never,
}

/// Counters of a run.
#[derive(Default)]
struct Tally {
    lines: u64,
    unique: u64,
    bytes: u64,
    /// Expected number of new lines taken for duplicates so far.
    est_false_positives: f64,
}

/// What ended the run.
enum End {
    Complete,
    /// The reader of our output went away.
    BrokenPipe,
}

/// The result of a write to standard output: a closed pipe ends the run
/// quietly, any other error is an error.
fn written(r: io::Result<()>) -> Result<End> {
    match r {
        Ok(()) => Ok(End::Complete),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(End::BrokenPipe),
        Err(e) => Err(e).context("cannot write to standard output"),
    }
}

pub(crate) fn run(args: DedupArgs) -> Result<ExitCode> {
    let inputs = open_inputs(&args.files)?;
    let mut backend = open_backend(&args)?;
    let progress = make_progress(&args, &inputs);
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut warner = CapacityWarner::default();

    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(256 << 10, stdout.lock());
    let sep = if args.null { 0u8 } else { b'\n' };
    let mut ctx = RunCtx {
        args: &args,
        backend: &mut backend,
        out: &mut out,
        sep,
        tally: &mut tally,
        progress: &progress,
        warner: &mut warner,
        started,
        new: Vec::new(),
    };
    let end = ctx.run_inputs(inputs.into_iter().map(|(i, _)| i).collect())?;
    if let End::BrokenPipe = end {
        progress.finish_and_clear();
        return Ok(ExitCode::SUCCESS);
    }
    if args.count {
        let n = if args.print_dups {
            tally.lines - tally.unique
        } else {
            tally.unique
        };
        if let End::BrokenPipe = written(writeln!(out, "{n}"))? {
            return Ok(ExitCode::SUCCESS);
        }
    }
    if let End::BrokenPipe = written(out.flush())? {
        progress.finish_and_clear();
        return Ok(ExitCode::SUCCESS);
    }
    drop(out);
    progress.finish_and_clear();

    // Final capacity check (a shared Redis filter may have been filled by
    // others).
    let final_fpp = match &mut backend {
        Backend::Local { filter, .. } => filter.expected_fpp_at(filter.len()),
        Backend::Redis { filter, .. } => {
            filter
                .info()
                .map_err(|e| anyhow!("redis: {e}"))?
                .current_fpp
        }
    };
    if final_fpp > backend.error_rate() * 1.0001 {
        warner.warn_end(&backend, final_fpp);
    }

    if let Backend::Local {
        filter,
        state: Some(path),
        format,
        ..
    } = &backend
    {
        if !args.read_only {
            save_state(filter, path, *format)?;
        }
    }
    if args.verbose {
        let secs = started.elapsed().as_secs_f64();
        let what = if args.read_only {
            format!(
                "{} lines in, {} not in the filter, {} in it (of those, up to about {:.1} false positives)",
                tally.lines,
                tally.unique,
                tally.lines - tally.unique,
                (tally.unique as f64 * final_fpp).max(0.0)
            )
        } else {
            format!(
                "{} lines in, {} unique out, {} duplicates; about {:.1} new lines taken for duplicates (false positives)",
                tally.lines,
                tally.unique,
                tally.lines - tally.unique,
                tally.est_false_positives
            )
        };
        eprintln!(
            "seen: {what}; {:.2} s, {} lines/s, {}/s",
            secs,
            rate(tally.lines as f64 / secs.max(1e-9)),
            crate::units::human_bytes((tally.bytes as f64 / secs.max(1e-9)) as u64),
        );
    }
    Ok(ExitCode::SUCCESS)
}

struct RunCtx<'a, W: Write> {
    args: &'a DedupArgs,
    backend: &'a mut Backend,
    out: &'a mut W,
    sep: u8,
    tally: &'a mut Tally,
    progress: &'a ProgressBar,
    warner: &'a mut CapacityWarner,
    started: Instant,
    new: Vec<bool>,
}

impl<W: Write> RunCtx<'_, W> {
    fn run_inputs(&mut self, inputs: Vec<Input>) -> Result<End> {
        let mut buf = vec![0u8; CHUNK];
        for input in inputs {
            let Input { name, mut reader } = input;
            let mut start = 0; // first byte not yet processed
            let mut end = 0; // end of valid data
            loop {
                if end == buf.len() {
                    if start > 0 {
                        buf.copy_within(start..end, 0);
                        end -= start;
                        start = 0;
                    } else {
                        // One record longer than the buffer: grow it.
                        buf.resize(buf.len() * 2, 0);
                    }
                }
                let n = match reader.read(&mut buf[end..]) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => bail!("cannot read {name}: {e}"),
                };
                if n == 0 {
                    // End of this input: the rest is a last unterminated record.
                    if end > start {
                        if let End::BrokenPipe = self.process(&buf[start..end], true)? {
                            return Ok(End::BrokenPipe);
                        }
                    }
                    break;
                }
                let short_read = end + n < buf.len();
                let scan_from = end;
                end += n;
                // Process every complete record.
                if let Some(last) = memchr::memrchr(self.sep, &buf[scan_from..end]) {
                    let upto = scan_from + last + 1;
                    if let End::BrokenPipe = self.process(&buf[start..upto], false)? {
                        return Ok(End::BrokenPipe);
                    }
                    start = upto;
                    if start == end {
                        start = 0;
                        end = 0;
                    }
                }
                // A short read means the input had no more for now (a pipe
                // being fed slowly, as `tail -f | seen dedup`): let the
                // reader of our output see what we have.
                if short_read && !self.args.count {
                    if let End::BrokenPipe = written(self.out.flush())? {
                        return Ok(End::BrokenPipe);
                    }
                }
            }
        }
        Ok(End::Complete)
    }

    /// Handles a run of whole records (each ending with the separator,
    /// except the last when `unterminated`).
    fn process(&mut self, data: &[u8], unterminated: bool) -> Result<End> {
        let mut slices: Vec<&[u8]> = Vec::new();
        let mut s = 0;
        for i in memchr::memchr_iter(self.sep, data) {
            slices.push(&data[s..i]);
            s = i + 1;
        }
        if unterminated && s < data.len() {
            slices.push(&data[s..]);
        }
        let fpp_before = match self.backend {
            Backend::Local { filter, .. } => filter.expected_fpp_at(filter.len()),
            Backend::Redis { .. } => self.warner.redis_fpp,
        };
        let stopped = self
            .backend
            .add(&slices, self.args.read_only, &mut self.new)?;
        slices.truncate(self.new.len());
        let new_count = self.new.iter().filter(|&&n| n).count() as u64;
        self.tally.lines += slices.len() as u64;
        self.tally.unique += new_count;
        self.tally.bytes += data.len() as u64;
        self.tally.est_false_positives += new_count as f64 * fpp_before;
        if !self.args.count {
            let want_new = !self.args.print_dups;
            for (rec, &new) in slices.iter().zip(&self.new) {
                if new == want_new {
                    let r = self
                        .out
                        .write_all(rec)
                        .and_then(|_| self.out.write_all(&[self.sep]));
                    if let End::BrokenPipe = written(r)? {
                        return Ok(End::BrokenPipe);
                    }
                }
            }
        }
        if let Some(stop) = stopped {
            written(self.out.flush())?;
            bail!(
                "redis: {}; {} line(s) whose add has an unknown outcome were taken as new",
                stop.cause,
                stop.unknown
            );
        }
        self.after_chunk(data.len() as u64)?;
        Ok(End::Complete)
    }

    fn after_chunk(&mut self, bytes: u64) -> Result<()> {
        let (items, capacity) = match self.backend {
            Backend::Local { filter, .. } => (filter.len(), filter.capacity()),
            Backend::Redis { filter, .. } => {
                // Ask Redis how full the shared filter is now and then.
                if self.tally.lines >= self.warner.next_redis_check {
                    self.warner.next_redis_check = self.tally.lines + 10_000_000;
                    let info = filter.info().map_err(|e| anyhow!("redis: {e}"))?;
                    self.warner.redis_fpp = info.current_fpp;
                    self.warner.redis_items = info.estimated_items as u64;
                }
                (
                    self.warner.redis_items.max(self.tally.unique),
                    filter.metadata().capacity,
                )
            }
        };
        if items > capacity && !self.warner.warned {
            self.warner.warned = true;
            let fpp = match self.backend {
                Backend::Local { filter, .. } => filter.expected_fpp_at(items),
                Backend::Redis { .. } => self.warner.redis_fpp,
            };
            let msg = over_capacity_message(capacity, self.backend.error_rate(), items, fpp);
            self.progress.suspend(|| eprintln!("{msg}"));
        }
        if !self.progress.is_hidden() {
            self.progress.inc(bytes);
            let secs = self.started.elapsed().as_secs_f64().max(1e-9);
            self.progress.set_message(format!(
                "{} lines, {} unique, {} lines/s, filter {:.1}% of capacity",
                self.tally.lines,
                self.tally.unique,
                rate(self.tally.lines as f64 / secs),
                100.0 * items as f64 / capacity as f64
            ));
        }
        Ok(())
    }
}

#[derive(Default)]
struct CapacityWarner {
    warned: bool,
    next_redis_check: u64,
    redis_fpp: f64,
    redis_items: u64,
}

impl CapacityWarner {
    fn warn_end(&self, backend: &Backend, fpp: f64) {
        eprintln!(
            "seen: warning: the filter is past its capacity of {}: its false-positive rate is now about {}, above the {} asked for; {}",
            backend.capacity(),
            fmt_rate(fpp),
            fmt_rate(backend.error_rate()),
            advice(backend)
        );
    }
}

fn advice(backend: &Backend) -> &'static str {
    match backend {
        Backend::Local { state: Some(_), .. } => {
            "start a new state file with a larger --capacity (a state file keeps the size it was made with)"
        }
        Backend::Local { .. } => "run again with a larger --capacity",
        Backend::Redis { .. } => "create a new filter (another --name) with a larger --capacity",
    }
}

fn over_capacity_message(capacity: u64, asked: f64, items: u64, fpp: f64) -> String {
    format!(
        "seen: warning: the filter now holds about {items} distinct lines, past its capacity of {capacity}; new lines are taken for duplicates at a rising rate (about {} now, {} asked for); use a larger --capacity",
        fmt_rate(fpp),
        fmt_rate(asked)
    )
}

fn fmt_rate(r: f64) -> String {
    format!("{r:.3e}")
}

fn rate(per_sec: f64) -> String {
    if per_sec >= 1e6 {
        format!("{:.2}M", per_sec / 1e6)
    } else if per_sec >= 1e3 {
        format!("{:.1}k", per_sec / 1e3)
    } else {
        format!("{per_sec:.0}")
    }
}

struct Input {
    /// How errors name it: `'path'` or `standard input`.
    name: String,
    reader: Box<dyn Read>,
}

/// Opens every input before anything is read, so a missing file fails the
/// run before any output.
fn open_inputs(files: &[PathBuf]) -> Result<Vec<(Input, Option<u64>)>> {
    let stdin_only = [PathBuf::from("-")];
    let files = if files.is_empty() {
        &stdin_only[..]
    } else {
        files
    };
    let mut out = Vec::with_capacity(files.len());
    for path in files {
        if path.as_os_str() == "-" {
            out.push((
                Input {
                    name: "standard input".into(),
                    reader: Box::new(io::stdin()),
                },
                None,
            ));
            continue;
        }
        let f = File::open(path)
            .with_context(|| format!("cannot open input file '{}'", path.display()))?;
        let meta = f
            .metadata()
            .with_context(|| format!("cannot read input file '{}'", path.display()))?;
        if meta.is_dir() {
            bail!(
                "input '{}' is a directory; give files to read",
                path.display()
            );
        }
        let size = meta.is_file().then_some(meta.len());
        out.push((
            Input {
                name: format!("input file '{}'", path.display()),
                reader: Box::new(f),
            },
            size,
        ));
    }
    Ok(out)
}

fn make_progress(args: &DedupArgs, inputs: &[(Input, Option<u64>)]) -> ProgressBar {
    let show = match args.progress {
        ProgressMode::Never => false,
        ProgressMode::Always => true,
        ProgressMode::Auto => io::stderr().is_terminal(),
    };
    if !show {
        return ProgressBar::hidden();
    }
    let total: Option<u64> = inputs.iter().map(|(_, s)| *s).sum();
    let pb = match total {
        Some(t) => {
            let pb = ProgressBar::with_draw_target(Some(t), ProgressDrawTarget::stderr());
            pb.set_style(
                ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {msg} (ETA {eta})")
                    .expect("valid template"),
            );
            pb
        }
        None => {
            let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            pb.set_style(
                ProgressStyle::with_template("{spinner} {bytes} read, {msg}")
                    .expect("valid template"),
            );
            pb
        }
    };
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}
