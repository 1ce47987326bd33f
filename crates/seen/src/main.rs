//! `seen`: the command line. Thin: flags are parsed and checked here, the
//! work is done by the library crates.

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("seen: {e:#}");
            ExitCode::from(2)
        }
    }
}
