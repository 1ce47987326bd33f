#!/usr/bin/env bash
# seen's Guava-layout filter against Guava itself, in one run: N URL-like
# strings put one at a time, then looked up present and absent, at FPP, on
# the filter Guava's BloomFilter.create(stringFunnel(UTF_8), N, FPP) makes
# (the same bits in both). Guava runs in GuavaPeer.java (JIT warmed by a
# first round), seen in the guava_bench example; prints both and the
# ratios (Guava's time / seen's: above 1, seen is faster). Needs javac and
# Debian's libguava-java. Not part of CI (about a minute at 10M).
#
#   scripts/bench_guava.sh [N] [FPP]        # default 10000000 0.01
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000000}
FPP=${2:-0.01}
JAR=${SEEN_GUAVA_JAR:-/usr/share/java/guava.jar}
CLASSES=target/guava-bench
mkdir -p "$CLASSES"
javac -encoding UTF-8 -cp "$JAR" -d "$CLASSES" crates/seen-core/tests/java/GuavaPeer.java
cargo build --release -q -p seen-core --example guava_bench

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB"
echo "java: $(java -version 2>&1 | head -1); guava: $(dpkg-query -W -f='${Version}' libguava-java 2>/dev/null || echo "$JAR")"
echo "workload: $N URL-like strings at $FPP"
guava=$(java -Xmx8g -cp "$JAR:$CLASSES" GuavaPeer bench "$N" "$FPP")
seen=$(target/release/examples/guava_bench "$N" "$FPP")
echo "guava: $guava"
echo "seen:  $seen"
ns() { # the number before " ns" after the word $1
  sed -E "s/.*$1 ([0-9.]+) ns.*/\\1/" <<< "$2"
}
for op in put present absent; do
  g=$(ns "$op" "$guava")
  s=$(ns "$op" "$seen")
  echo "$op: guava $g ns, seen $s ns, guava/seen $(awk -v g="$g" -v s="$s" 'BEGIN { printf "%.2f", g / s }')"
done
