#!/usr/bin/env bash
# Benchmarks `seen serve` with redis-benchmark, and a plain redis-server
# doing SADD of the same kind of items in the same run (the memory a Bloom
# filter saves). RedisBloom's figures, measured on this machine with
# RedisBloom 2.8.20 in Redis 7.0.15, are printed beside ours as the
# reference the targets of issue #4 are defined against.
#
#   cargo build --release -p seen && scripts/bench_server.sh
#
# With BASELINE=<another seen binary> (e.g. one built from an earlier
# commit), every throughput test also runs against that binary, in turns
# with this one, and a column gives this one's median over the baseline's.
# ONLY=<test> (add1, add16, add64, exists64, madd64, ...) runs that test
# alone, ROUNDS times, and skips memory and restart: for a close
# comparison of one figure.
#
# Every throughput is measured ROUNDS times (default 3; the tests take
# turns, so that a slow moment of this shared VM does not hit one test
# only) and the median is printed with the range. About 2.5 minutes on 2
# cores. Not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEN=${SEEN:-target/release/seen}
TMP=$(mktemp -d)
PORT=${PORT:-16501}
RPORT=${RPORT:-16502}
BPORT=${BPORT:-16503}
BASELINE=${BASELINE:-}
ONLY=${ONLY:-}
N=${N:-3000000}
ROUNDS=${ROUNDS:-3}
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT

start_seen() { # [binary port dir]: this checkout's seen by default
  local bin=${1:-$SEEN} port=${2:-$PORT} dir=${3:-$TMP/seen}
  "$bin" serve --dir "$dir" --port "$port" --log info 2>>"$dir.log" &
  LAST_PID=$!
  for _ in $(seq 1 500); do
    redis-cli -p "$port" PING >/dev/null 2>&1 && return 0
    sleep 0.01
  done
  echo "seen did not start"; cat "$dir.log"; exit 1
}

rps() { # redis-benchmark's final requests-per-second figure
  redis-benchmark -p "$1" -c 50 -P "$2" -n "$3" -r 100000000 -q "${@:4}" \
    | tr '\r' '\n' | grep 'requests per second' | tail -1 \
    | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/'
}

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
echo "seen: $("$SEEN" --version); redis: $(redis-server --version | cut -d' ' -f3)"
echo

start_seen; SEEN_PID=$LAST_PID
redis-cli -p "$PORT" BF.RESERVE bf 0.001 100000000 NONSCALING >/dev/null
if [ -n "$BASELINE" ]; then
  echo "baseline: $("$BASELINE" --version) ($BASELINE)"
  start_seen "$BASELINE" "$BPORT" "$TMP/baseline"; BASE_PID=$LAST_PID
  redis-cli -p "$BPORT" BF.RESERVE bf 0.001 100000000 NONSCALING >/dev/null
fi
R=__rand_int__
declare -A RUNS
printf '%-34s %14s %14s %8s   %s\n' "test" "seen" "RedisBloom*" "ratio" "range of $ROUNDS runs"
[ -n "$BASELINE" ] && printf '%-34s %14s %14s %8s\n' "" "" "baseline" "seen/baseline"
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
row() { # name key reference
  local m lo hi
  [ -n "${RUNS[$2]:-}" ] || return 0
  m=$(echo "${RUNS[$2]}" | median)
  lo=$(echo "${RUNS[$2]}" | tr ' ' '\n' | grep . | sort -g | head -1)
  hi=$(echo "${RUNS[$2]}" | tr ' ' '\n' | grep . | sort -g | tail -1)
  if [ -n "$3" ]; then
    printf '%-34s %14.0f %14.0f %7.2fx   %.0f-%.0f (%.2fx-%.2fx)\n' "$1" "$m" "$3" "$(echo "$m / $3" | bc -l)" \
      "$lo" "$hi" "$(echo "$lo / $3" | bc -l)" "$(echo "$hi / $3" | bc -l)"
  else
    printf '%-34s %14.0f %14s %8s   %.0f-%.0f\n' "$1" "$m" "-" "-" "$lo" "$hi"
  fi
  if [ -n "$BASELINE" ]; then
    local b
    b=$(echo "${RUNS[base_$2]}" | median)
    printf '%-34s %14s %14.0f %7.3fx   (baseline runs:%s)\n' "" "" "$b" "$(echo "$m / $b" | bc -l)" "${RUNS[base_$2]}"
  fi
}
measure() { # key multiplier redis-benchmark arguments...: one run of a test
  local key=$1 mul=$2; shift 2
  if [ -n "$ONLY" ] && [ "$ONLY" != "$key" ]; then return 0; fi
  RUNS[$key]+=" $(echo "$(rps "$PORT" "$@") * $mul" | bc -l)"
  if [ -n "$BASELINE" ]; then
    RUNS[base_$key]+=" $(echo "$(rps "$BPORT" "$@") * $mul" | bc -l)"
  fi
}
for _ in $(seq 1 "$ROUNDS"); do
  for P in 1 16 64; do
    n=$N; [ "$P" = 1 ] && n=$((N / 10))
    measure "add$P" 1 "$P" "$n" BF.ADD bf $R
    measure "exists$P" 1 "$P" "$n" BF.EXISTS bf $R
  done
  for P in 16 64; do
    measure "madd$P" 10 "$P" $((N / 10)) BF.MADD bf $R $R $R $R $R $R $R $R $R $R
    measure "mexists$P" 10 "$P" $((N / 10)) BF.MEXISTS bf $R $R $R $R $R $R $R $R $R $R
  done
done
row "BF.ADD P=1 (ops/s)" add1 ""
row "BF.ADD P=16 (ops/s)" add16 ""
row "BF.ADD P=64 (ops/s)" add64 970000
row "BF.EXISTS P=1 (ops/s)" exists1 ""
row "BF.EXISTS P=16 (ops/s)" exists16 ""
row "BF.EXISTS P=64 (ops/s)" exists64 1000000
row "BF.MADD x10 P=16 (items/s)" madd16 1600000
row "BF.MADD x10 P=64 (items/s)" madd64 2000000
row "BF.MEXISTS x10 P=16 (items/s)" mexists16 ""
row "BF.MEXISTS x10 P=64 (items/s)" mexists64 ""
if [ -n "$ONLY" ]; then
  kill -TERM "$SEEN_PID"; wait "$SEEN_PID" || true
  if [ -n "$BASELINE" ]; then kill -TERM "$BASE_PID"; wait "$BASE_PID" || true; fi
  exit 0
fi

# Memory and restart on a fresh server whose filter holds 10M items (the
# throughput runs above added about three times as many).
kill -TERM "$SEEN_PID"; wait "$SEEN_PID" || true
if [ -n "$BASELINE" ]; then kill -TERM "$BASE_PID"; wait "$BASE_PID" || true; fi
rm -rf "$TMP/seen"
start_seen; SEEN_PID=$LAST_PID
redis-cli -p "$PORT" BF.RESERVE bf 0.001 100000000 NONSCALING >/dev/null
while [ "$(redis-cli -p "$PORT" BF.CARD bf)" -lt 10000000 ]; do
  redis-benchmark -p "$PORT" -c 50 -P 64 -n 200000 -r 100000000 -q \
    BF.MADD bf $R $R $R $R $R $R $R $R $R $R >/dev/null
done
ITEMS=$(redis-cli -p "$PORT" BF.CARD bf)
redis-cli -p "$PORT" SAVE >/dev/null
# The RSS of the server idle.
sleep 1
SEEN_RSS=$(rss_kib "$SEEN_PID")
echo
echo "items in bf: $ITEMS"
printf '%-34s %11.1f MiB  (RedisBloom*: 180 MiB)\n' "seen RSS after SAVE" "$(echo "$SEEN_RSS / 1024" | bc -l)"

# Restart time: SIGTERM (checkpoint), then start and time until PING answers.
kill -TERM "$SEEN_PID"; wait "$SEEN_PID" || true
t0=$(date +%s.%N)
start_seen; SEEN_PID=$LAST_PID
t1=$(date +%s.%N)
redis-cli -p "$PORT" BF.CARD bf | grep -qx "$ITEMS" || { echo "BF.CARD changed after restart"; exit 1; }
printf '%-34s %11.3f s    (RedisBloom*: 1 s)\n' "restart to first PING" "$(echo "$t1 - $t0" | bc -l)"
grep -o 'data directory open.*' "$TMP/seen.log" | tail -1 | sed 's/^/  log: /'
kill -TERM "$SEEN_PID"; wait "$SEEN_PID" || true

# Plain Redis: a set of the same number of random members.
redis-server --port "$RPORT" --save '' --appendonly no --dir "$TMP" >/dev/null &
RPID=$!
sleep 0.5
while [ "$(redis-cli -p "$RPORT" SCARD s)" -lt "$ITEMS" ]; do
  redis-benchmark -p "$RPORT" -c 50 -P 64 -n 1000000 -r 100000000 -q SADD s $R >/dev/null
done
RRSS=$(rss_kib "$RPID")
printf '%-34s %11.1f MiB  for %s members (%.1fx seen)\n' "redis-server SADD RSS" \
  "$(echo "$RRSS / 1024" | bc -l)" "$(redis-cli -p "$RPORT" SCARD s)" "$(echo "$RRSS / $SEEN_RSS" | bc -l)"
kill "$RPID"
echo
echo "* RedisBloom 2.8.20 in Redis 7.0.15, same machine, reference figures from issue #4."
