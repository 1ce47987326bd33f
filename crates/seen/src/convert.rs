//! `seen convert`: a filter from Guava's file format to seen's and back,
//! its bits unchanged, so a filter a Java service built moves into
//! `seen dedup --state` or `seen serve` (`BF.IMPORT`) and back out again
//! without a single item added again.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;
use seen_core::{guava, AnyFilter, BloomFilter, Layout};

use crate::filter_file::{self, Content, FileFormat};

/// Convert a filter file between Guava's format and seen's.
#[derive(Args, Debug)]
#[command(after_long_help = "\
Examples:
  # A filter written by Java's BloomFilter.writeTo, into a seen state file:
  seen convert --from guava crawl.guava crawl.seen
  seen dedup --state crawl.seen new-urls.txt > to-fetch.txt

  # And back, for Java's BloomFilter.readFrom:
  seen convert --to guava crawl.seen crawl.guava

  # A filter of a seen serve data directory (created with LAYOUT GUAVA or
  # imported with BF.IMPORT ... GUAVA), from its snapshot:
  seen convert --to guava ./seen-data/snapshots/00000000000000000003.snap crawl.guava

Guava files hold no capacity or error rate: the seen file takes those the
filter's bits and hash count are optimal for, and its item count from
Guava's approximateElementCount(). Only filters in a Guava layout can
become Guava files: a blocked or RedisBloom-layout filter's bits are not
where Guava looks for an item's bits.

The output is written atomically (a temporary file renamed over it) and an
existing OUTPUT is refused unless --force is given.

Exit status: 0, or 2 on any error (OUTPUT then untouched).")]
pub(crate) struct ConvertArgs {
    /// The format of INPUT (OUTPUT is then seen's).
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        required_unless_present = "to"
    )]
    from: Option<FileFormat>,

    /// The format of OUTPUT (INPUT is then seen's: a filter file or a
    /// `seen serve` snapshot).
    #[arg(long, value_enum, value_name = "FORMAT", conflicts_with = "from")]
    to: Option<FileFormat>,

    /// The file to read.
    #[arg(value_name = "INPUT")]
    input: PathBuf,

    /// The file to write.
    #[arg(value_name = "OUTPUT")]
    output: PathBuf,

    /// Replace OUTPUT if it exists.
    #[arg(long)]
    force: bool,
}

pub(crate) fn run(args: ConvertArgs) -> Result<ExitCode> {
    let (from, to) = match (args.from, args.to) {
        (Some(from), None) => (from, FileFormat::Seen),
        (None, Some(to)) => (FileFormat::Seen, to),
        _ => bail!("give --from FORMAT or --to FORMAT"),
    };
    if from == to {
        bail!("INPUT and OUTPUT would both be in {from:?} format: there is nothing to convert");
    }
    if args.output.exists() && !args.force {
        bail!(
            "'{}' exists; give --force to replace it",
            args.output.display()
        );
    }
    filter_file::check_writable(&args.output)?;
    let filter = read_input(&args.input, from)?;
    if to == FileFormat::Guava && guava::strategy_ordinal(filter.layout()).is_none() {
        bail!(
            "'{}' holds a {} filter, which cannot become a Guava filter: its items' bits are not \
             where Guava looks for them. Only Guava-layout filters convert (made from a Guava \
             file, by `seen dedup --format guava`, or by BF.RESERVE ... LAYOUT GUAVA); add the \
             items to a Guava filter instead",
            args.input.display(),
            layout_name(filter.layout())
        );
    }
    filter_file::save_bloom(&filter, &args.output, to)?;
    Ok(ExitCode::SUCCESS)
}

fn layout_name(layout: Layout) -> String {
    format!("{layout:?}").to_lowercase()
}

/// The Bloom filter in INPUT, read as `format`.
fn read_input(path: &Path, format: FileFormat) -> Result<BloomFilter> {
    let Some((f, content)) = filter_file::open_sniffed(path, "input")? else {
        bail!("input '{}' does not exist", path.display());
    };
    let any = match (format, content) {
        (FileFormat::Guava, Content::Guava) => return filter_file::read_guava(path, f),
        (FileFormat::Guava, _) => bail!(
            "'{}' is not a Guava filter file (a strategy byte, a hash count, a word count and \
             that many words, as BloomFilter.writeTo writes)",
            path.display()
        ),
        (FileFormat::Seen, Content::SeenFilter) => filter_file::read_seen(path, f)?,
        (FileFormat::Seen, Content::SeenSnapshot) => filter_file::read_snapshot(path)?.filter,
        (FileFormat::Seen, Content::Guava) => bail!(
            "'{}' is a Guava filter file already; to make a seen file of it use --from guava",
            path.display()
        ),
        (FileFormat::Seen, Content::Unknown(..)) => bail!(
            "'{}' is not a seen filter file or snapshot (no SEENFLTR or SEENSNAP magic)",
            path.display()
        ),
    };
    match any {
        AnyFilter::Bloom(f) => Ok(f),
        other => bail!(
            "'{}' holds a {:?} filter; only a fixed-size Bloom filter has a Guava counterpart",
            path.display(),
            other.kind()
        ),
    }
}
