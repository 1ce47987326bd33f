//! `seen serve`.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::parser::ValueSource;
use clap::{Args, FromArgMatches};
use seen_server::{read_config_file, BfDefaults, BfSetting, Config};
use seen_store::FsyncPolicy;

use crate::units::parse_bytes;

/// Flags of `seen serve`. Every flag has a Redis-like default; the
/// examples in `--help` are tested.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  seen serve --dir ./seen-data
      Listen on 127.0.0.1:6379 with the data in ./seen-data, then:
      redis-cli BF.ADD urls https://example.com/

  seen serve --port 6380 --fsync always --requirepass s3cret
      Acknowledge an add only once it is on disk; clients AUTH first.

  seen serve --bind 0.0.0.0 --maxmemory 8GiB --maxclients 2000
      Serve the network (protect it with --requirepass), at most 8 GiB of
      filters.")]
pub(crate) struct ServeArgs {
    /// Settings file: TOML, one key per flag, named as the flag without its
    /// dashes (`port = 6380`, `fsync = "always"`, `bind = ["127.0.0.1"]`,
    /// `salvage = true`); a flag given on the command line overrides the
    /// file. `CONFIG REWRITE` writes the settings `CONFIG SET` changed back
    /// into it. packaging/seen.toml lists every key.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory: snapshots and write-ahead log (created if missing).
    #[arg(long, default_value = "seen-data", value_name = "DIR")]
    dir: PathBuf,
    /// Address to listen on; repeat for several. Anything but loopback
    /// exposes the server: set --requirepass.
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    bind: Vec<IpAddr>,
    /// TCP port (0: any free port, printed in the log).
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// When the log is synced: `always` (reply after the add is on disk),
    /// `everysec` (a power cut loses about the last second; when syncs
    /// run late, with every core busy or a slow disk, writes wait for one
    /// once the last began 1.5 s ago, so a cut loses at most about that
    /// much; a crash of the process loses nothing) or `no` (the OS
    /// decides). `INFO persistence` shows `aof_last_write_status:err`
    /// while writes fail for the log (a failed sync: each write then first
    /// tries a checkpoint, and is refused if it fails; a full disk: until
    /// space returns) and, under `everysec`, how far back a power cut now
    /// would reach as `seen_unsynced_ms`.
    #[arg(long, default_value = "everysec", value_name = "POLICY", value_parser = parse_fsync)]
    fsync: FsyncPolicy,
    /// Password clients must send with AUTH (or HELLO ... AUTH default PASS).
    #[arg(
        long,
        value_name = "PASSWORD",
        env = "SEEN_REQUIREPASS",
        hide_env_values = true
    )]
    requirepass: Option<String>,
    /// Most simultaneous clients.
    #[arg(long, default_value_t = 10_000)]
    maxclients: usize,
    /// Memory all filters together may use (e.g. 8GiB; 0: no limit),
    /// scalable filters' growth included; commands that would create a
    /// filter, or grow one, past it get an error. Default: 3/4 of the RAM.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    maxmemory: Option<u64>,
    /// Largest single filter (e.g. 16GiB).
    #[arg(long, default_value = "64GiB", value_name = "SIZE", value_parser = parse_bytes)]
    max_filter_bytes: u64,
    /// Largest argument of a request (Redis's proto-max-bulk-len).
    #[arg(long, default_value = "512MiB", value_name = "SIZE", value_parser = parse_bytes)]
    proto_max_bulk_len: u64,
    /// Most unparsed input buffered for one client before it is
    /// disconnected (Redis's client-query-buffer-limit).
    #[arg(long, default_value = "1GiB", value_name = "SIZE", value_parser = parse_bytes)]
    client_query_buffer_limit: u64,
    /// Close clients idle this many seconds (0: never).
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    timeout: u64,
    /// Checkpoint changed filters every this many seconds (0: only on SAVE,
    /// BGSAVE and shutdown). Checkpoints bound the log, so restarts stay
    /// fast.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    save_interval: u64,
    /// Also checkpoint when the log written since the last checkpoint
    /// passes this size (0: never for that reason), so that the log's disk
    /// use and a restart's replay stay bounded. `INFO persistence` shows
    /// that log as `seen_log_bytes`.
    #[arg(long, default_value = "1GiB", value_name = "SIZE", value_parser = parse_bytes)]
    save_log_size: u64,
    /// Open a data directory whose log or snapshots are damaged, keeping
    /// what can be read (each loss logged as a warning), instead of
    /// refusing to start with an error naming the file and offset. If it
    /// skipped anything, the open then checkpoints, so that later starts
    /// need no --salvage; a damaged snapshot is moved aside to
    /// `<id>.snap.damaged` (or `.damaged.<n>` if that name is taken). With
    /// nothing damaged it is an ordinary start, so the flag may be given
    /// every time. A snapshot that cannot be read (an I/O error), or is
    /// sound but larger than --max-filter-bytes, still stops the start:
    /// raise the limit, or fix the disk.
    #[arg(long)]
    salvage: bool,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Error rate of the filters BF.ADD, BF.MADD and BF.INSERT create for
    /// a missing key (RedisBloom's bf-error-rate, in (0, 1); above 0.25 is
    /// taken as 0.25). CONFIG SET bf-error-rate changes it while running.
    #[arg(long, default_value = "0.01", value_name = "RATE")]
    bf_error_rate: String,
    /// Capacity of the filters BF.ADD, BF.MADD and BF.INSERT create for a
    /// missing key (RedisBloom's bf-initial-size, 1 to 1073741824).
    #[arg(long, default_value = "100", value_name = "ITEMS")]
    bf_initial_size: String,
    /// Expansion of the filters BF.ADD, BF.MADD and BF.INSERT create, and
    /// of BF.RESERVE without EXPANSION (RedisBloom's bf-expansion-factor,
    /// 0 to 32768; 0: they do not scale).
    #[arg(long, default_value = "2", value_name = "FACTOR")]
    bf_expansion_factor: String,
    /// Commands that take at least this many microseconds go in the slow
    /// log, read with SLOWLOG GET (negative: none, 0: every command;
    /// CONFIG SET slowlog-log-slower-than changes it).
    #[arg(
        long,
        default_value_t = 10_000,
        value_name = "MICROSECONDS",
        allow_negative_numbers = true
    )]
    slowlog_log_slower_than: i64,
    /// Entries the slow log keeps (CONFIG SET slowlog-max-len changes it).
    #[arg(long, default_value_t = 128, value_name = "ENTRIES")]
    slowlog_max_len: usize,
    /// Serve Prometheus metrics at http://ADDR/metrics (e.g.
    /// 127.0.0.1:9479): per-command calls, errors and latency histograms,
    /// clients, memory, and each filter's fill and error rate now. Off by
    /// default; a scrape reads every filter's bits once.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// Filters the metrics show one by one (by name order); the rest are
    /// summed in seen_unlisted_* metrics.
    #[arg(long, default_value_t = 100, value_name = "N")]
    metrics_max_filters: usize,
    /// Log filter (tracing's RUST_LOG syntax), e.g. `info` or `debug`.
    #[arg(long, default_value = "info", env = "SEEN_LOG")]
    log: String,
    /// Log lines as `text` (for people) or `json` (one object a line, for
    /// log shippers), on stderr.
    #[arg(long, default_value = "text", value_name = "FORMAT", value_parser = ["text", "json"])]
    log_format: String,
}

fn parse_fsync(s: &str) -> Result<FsyncPolicy, String> {
    s.parse()
}

/// `seen serve`'s flags as a command of their own.
fn serve_command() -> clap::Command {
    ServeArgs::augment_args(clap::Command::new("serve").no_binary_name(true))
}

/// Clap's message of a bad value, as one line.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let line = text.lines().next().unwrap_or_default().trim();
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}

/// The flags of `seen serve` with the settings of its `--config` file
/// under them: each setting is checked as its flag would be (a bad one is
/// refused with its line), and taken where the command line (or the
/// flag's environment variable) did not give that flag. `cli` is what
/// followed `serve` on the command line.
pub(crate) fn with_config_file(a: ServeArgs, cli: &[OsString]) -> anyhow::Result<ServeArgs> {
    let Some(path) = a.config.clone() else {
        return Ok(a);
    };
    let settings = read_config_file(&path)?;
    let cmd = serve_command();
    let given = cmd.clone().try_get_matches_from(cli)?;
    let mut from_file: Vec<OsString> = Vec::new();
    for s in settings {
        let at = format!("{} line {}: key '{}'", path.display(), s.line, s.key);
        let arg = cmd
            .get_arguments()
            .find(|arg| arg.get_long() == Some(s.key.as_str()) && arg.get_id() != "config")
            .ok_or_else(|| {
                anyhow::anyhow!("{at}: not a setting (the keys are the flags of `seen serve --help` without their dashes)")
            })?;
        // `--key=value`, so that a value starting with `-` stays a value.
        let mut args = Vec::new();
        if s.switch {
            if !s.values.is_empty() {
                args.push(OsString::from(format!("--{}", s.key)));
            }
        } else {
            for v in &s.values {
                args.push(OsString::from(format!("--{}={v}", s.key)));
            }
        }
        cmd.clone()
            .try_get_matches_from(&args)
            .map_err(|e| anyhow::anyhow!("{at}: {}", clap_message(&e)))?;
        let on_command_line = matches!(
            given.value_source(arg.get_id().as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if !on_command_line {
            from_file.extend(args);
        }
    }
    let all: Vec<OsString> = from_file.into_iter().chain(cli.iter().cloned()).collect();
    let merged = cmd.try_get_matches_from(all)?;
    let mut merged = ServeArgs::from_arg_matches(&merged)?;
    // CONFIG REWRITE writes to the file wherever the server's directory is.
    merged.config = Some(std::path::absolute(&path)?);
    Ok(merged)
}

pub(crate) fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let filter = tracing_subscriber::EnvFilter::try_new(&a.log)
        .with_context(|| format!("--log '{}' is not a valid log filter", a.log))?;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if a.log_format == "json" {
        logs.json().init();
    } else {
        logs.with_ansi(std::io::stderr().is_terminal()).init();
    }
    let to_usize = |v: u64, flag: &str| {
        usize::try_from(v).with_context(|| format!("{flag} {v} is too large for this machine"))
    };
    if a.requirepass.as_deref() == Some("") {
        anyhow::bail!("--requirepass is empty: give a password or leave the flag out");
    }
    let mut bf = BfDefaults::default();
    for (setting, value) in [
        (BfSetting::ErrorRate, &a.bf_error_rate),
        (BfSetting::InitialSize, &a.bf_initial_size),
        (BfSetting::ExpansionFactor, &a.bf_expansion_factor),
    ] {
        bf.set(setting, value.as_bytes())
            .map_err(|why| anyhow::anyhow!("--{}: {why}", setting.name()))?;
    }
    let config = Config {
        bind: a.bind,
        port: a.port,
        dir: a.dir,
        fsync: a.fsync,
        requirepass: a.requirepass,
        maxclients: a.maxclients,
        proto_max_bulk_len: to_usize(a.proto_max_bulk_len, "--proto-max-bulk-len")?,
        client_query_buffer_limit: to_usize(
            a.client_query_buffer_limit,
            "--client-query-buffer-limit",
        )?,
        maxmemory: match a.maxmemory {
            None => seen_server::default_maxmemory(),
            Some(0) => u64::MAX,
            Some(limit) => limit,
        },
        max_filter_bytes: a.max_filter_bytes,
        timeout: (a.timeout > 0).then(|| Duration::from_secs(a.timeout)),
        save_interval: (a.save_interval > 0).then(|| Duration::from_secs(a.save_interval)),
        save_log_size: (a.save_log_size > 0).then_some(a.save_log_size),
        salvage: a.salvage,
        threads: a.threads,
        bf,
        slowlog_log_slower_than: a.slowlog_log_slower_than,
        slowlog_max_len: a.slowlog_max_len,
        metrics: a.metrics,
        metrics_max_filters: a.metrics_max_filters,
        config_file: a.config,
    };
    let dir = config.dir.clone();
    seen_server::run_blocking(config).with_context(|| format!("serving from {}", dir.display()))?;
    Ok(ExitCode::SUCCESS)
}
