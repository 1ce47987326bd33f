#!/usr/bin/env bash
# The store's benchmark (crates/seen-store/benches/store.rs) of this
# checkout against an earlier commit's store, in the same run: the same
# bench source is built against both (it uses only calls both have), and
# the two binaries run in turns, ROUNDS times each (default 2). Prints each
# cell's median for both and the ratio (this / earlier).
#
#   scripts/bench_store.sh f2c739a
#
# About 3 minutes per run on 2 cores. Not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:?usage: scripts/bench_store.sh <earlier commit>}
ROUNDS=${ROUNDS:-2}
WT=target/bench-baseline
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

[ -d "$WT" ] || git worktree add --detach "$WT" "$BASE" >/dev/null
git -C "$WT" checkout --detach -q "$BASE"
cp crates/seen-store/benches/store.rs "$WT/crates/seen-store/benches/store.rs"
build() { # dir -> path of the bench binary
  (cd "$1" && cargo bench -p seen-store --bench store --no-run --message-format=json 2>/dev/null) \
    | grep -o '"executable":"[^"]*/deps/store-[^"]*"' | tail -1 | cut -d'"' -f4
}
NEW=$(build .)
OLD=$(build "$WT")
echo "this: $(git rev-parse --short HEAD)  earlier: $BASE"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(date -u +%F)"
for r in $(seq 1 "$ROUNDS"); do
  for side in new old; do
    bin=$NEW; [ $side = old ] && bin=$OLD
    (cd "$(dirname "$bin")/../.." && SEEN_BENCH_DIR="$PWD/bench-store" "$bin" --bench) \
      | awk -v s=$side '$1 == "cell" {print s, $2, $3, $4}' >>"$OUT/cells"
  done
done
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '| cell | this | earlier | this / earlier |\n|---|---:|---:|---:|\n'
for cell in $(awk '{print $2}' "$OUT/cells" | awk '!seen[$0]++'); do
  n=$(awk -v c="$cell" '$1 == "new" && $2 == c {print $3}' "$OUT/cells" | median)
  o=$(awk -v c="$cell" '$1 == "old" && $2 == c {print $3}' "$OUT/cells" | median)
  u=$(awk -v c="$cell" '$2 == c {print $4; exit}' "$OUT/cells")
  printf '| %s (%s) | %s | %s | %.2f |\n' "$cell" "$u" "$n" "$o" "$(echo "$n / $o" | bc -l)"
done
