#!/usr/bin/env bash
# seen dedup against awk '!seen[$0]++', sort -u and a Rust HashSet<String>,
# in one run on the same input: wall time and peak memory (max RSS from
# /usr/bin/time), with ratios. Not part of CI (about two minutes).
#
#   scripts/bench_dedup.sh [LINES] [DUP_FRACTION]     # default 10000000 0.3
#
# The input is URL-like lines of about 69 bytes (scripts/gen_urls.py, fixed
# seed), kept in $BENCH_DIR (default /tmp/seen-bench) between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
LINES=${1:-10000000}
DUP=${2:-0.3}
DIR=${BENCH_DIR:-/tmp/seen-bench}
mkdir -p "$DIR"
IN="$DIR/urls-$LINES-$DUP.txt"
if [ ! -s "$IN" ]; then
  echo "generating $IN"
  python3 scripts/gen_urls.py "$LINES" "$DUP" 42 > "$IN" 2> "$IN.distinct"
fi
DISTINCT=$(cat "$IN.distinct")
cargo build --release -q -p seen --bin seen --example hashset_dedup
SEEN=target/release/seen
HSET=target/release/examples/hashset_dedup
AWK=$(readlink -f "$(command -v awk)")

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB"
echo "input: $LINES lines, $DISTINCT distinct, $(du -m "$IN" | cut -f1) MB; awk is $AWK"
cat "$IN" > /dev/null # page cache

run() { # name, command...: prints "name secs KiB lines"
  local name=$1; shift
  local t="$DIR/time.txt"
  /usr/bin/time -f "%e %M" -o "$t" "$@" < "$IN" > "$DIR/out-$name.txt"
  read -r secs kib < "$t"
  echo "$name $secs $kib $(wc -l < "$DIR/out-$name.txt")"
}

results=$(
  run seen "$SEEN" dedup --capacity "$LINES" --fpp 1e-4
  run hashset "$HSET"
  run awk "$AWK" '!seen[$0]++'
  run sort sort -u
  run sort_c env LC_ALL=C sort -u
)
printf '%-9s %9s %11s %11s %9s %9s\n' tool seconds "peak MiB" "lines out" "seen x" "mem /seen"
echo "$results" | while read -r name secs kib lines; do
  read -r _ ssecs skib _ <<< "$(echo "$results" | head -1)"
  printf '%-9s %9.2f %11.1f %11d %9.1f %9.1f\n' "$name" "$secs" "$(echo "$kib/1024" | bc -l)" \
    "$lines" "$(echo "$secs/$ssecs" | bc -l)" "$(echo "$kib/$skib" | bc -l)"
done
echo "(seen x: how many times longer than seen dedup; mem /seen: peak memory over seen's)"
seen_lines=$(echo "$results" | head -1 | cut -d' ' -f4)
echo "seen dedup printed $seen_lines of $DISTINCT distinct lines: $((DISTINCT - seen_lines)) lost to false positives (fpp 1e-4)"
