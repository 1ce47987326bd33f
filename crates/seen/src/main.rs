//! `seen`: the command line. Thin: flags are parsed and checked here, the
//! work is done by the library crates.

mod calc;
mod convert;
mod dedup;
mod filter_file;
mod inspect;
mod serve;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Have we seen this before? Bloom filters for deduplication at any scale.
#[derive(Parser)]
#[command(name = "seen", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a RESP server that speaks RedisBloom's BF.* commands, with the
    /// filters kept durable in a data directory.
    Serve(serve::ServeArgs),
    /// Print each line the first time it is seen (stdin or files), with
    /// memory bounded by the filter; resumable with --state, shared between
    /// machines with --redis.
    Dedup(dedup::DedupArgs),
    /// Sizing: bits and hashes for a capacity and error rate, the error rate
    /// for a capacity and memory, the capacity for memory and a rate.
    Calc(calc::CalcArgs),
    /// Show what a state file, a snapshot, a Guava file or a Redis filter
    /// holds: layout, size, fill, estimated items, error rate now.
    Inspect(inspect::InspectArgs),
    /// Convert a filter between Guava's file format and seen's, bits
    /// unchanged: `--from guava guava.bin crawl.seen`, `--to guava
    /// crawl.seen guava.bin`.
    Convert(convert::ConvertArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let result = match cli.command {
        Command::Serve(args) => {
            let cli: Vec<_> = std::env::args_os().skip(2).collect();
            serve::with_config_file(args, &cli).and_then(serve::run)
        }
        Command::Dedup(args) => dedup::run(args),
        Command::Calc(args) => calc::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Convert(args) => convert::run(args),
    };
    match result {
        Ok(code) => code,
        // The reader of the output went away (`seen calc --table | head`):
        // the end it asked for, not an error.
        Err(e) if closed_output(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seen: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn closed_output(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Clap's errors in seen's one-line form: `seen: <what is wrong>`, exit 2.
/// Help and version go to stdout with exit 0, as clap does.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // No command given: the help, on stderr, as a usage error.
            let _ = e.print();
            return ExitCode::from(2);
        }
        _ => {}
    }
    // The message up to the first blank line, as one line ("required
    // arguments were not provided: --name <NAME>").
    let text = e.render().to_string();
    let first = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .collect::<Vec<_>>()
        .join(" ");
    let first = first.strip_prefix("error: ").unwrap_or(&first);
    eprintln!("seen: {first} (see `seen --help` or `seen <command> --help`)");
    ExitCode::from(2)
}
