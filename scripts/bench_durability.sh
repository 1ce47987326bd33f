#!/usr/bin/env bash
# `seen serve` against Redis with an append-only file, as durable as each
# other, in one run:
#
# 1. Throughput: redis-benchmark -c 50, -P 1 and -P 64, BF.ADD of random
#    items on `seen serve --fsync P` against SET on `redis-server
#    --appendonly yes --appendfsync P` (and BF.ADD on RedisBloom, when
#    REDISBLOOM names its module), for P = everysec and always.
# 2. Restart and disk: a 100M-capacity, 0.001 filter holding 10M items,
#    shut down cleanly; then 9 restarts taking turns, each timed from the
#    process's start to the first `BF.EXISTS` of an item it holds answered
#    1; and the bytes each keeps on disk (seen: the data directory;
#    RedisBloom: its RDB file). Needs REDISBLOOM.
#
#   cargo build --release -p seen
#   REDISBLOOM=/path/to/redisbloom.so scripts/bench_durability.sh
#
# About 10 minutes on 2 cores. Not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEN=${SEEN:-target/release/seen}
RB=${REDISBLOOM:-}
TMP=$(mktemp -d -p "${BENCH_DIR:-target}")
SPORT=16901
RPORT=16902
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT

wait_port() { for _ in $(seq 1 2000); do redis-cli -p "$1" PING 2>/dev/null | grep -q PONG && return 0; sleep 0.01; done; return 1; }
rps() { # port pipeline requests command...
  redis-benchmark -p "$1" -c 50 -P "$2" -n "$3" -r 100000000 -q "${@:4}" \
    | tr '\r' '\n' | grep 'requests per second' | tail -1 \
    | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/'
}
seen_up() { # dir policy
  "$SEEN" serve --dir "$1" --port $SPORT --fsync "$2" --save-interval 0 2>>"$TMP/seen.log" &
  wait_port $SPORT
}
redis_up() { # dir extra args...
  mkdir -p "$1"
  redis-server --port $RPORT --dir "$1" --save '' "${@:2}" >>"$TMP/redis.log" 2>&1 &
  wait_port $RPORT
}
down() { # port: shuts the server down and waits until it is gone
  redis-cli -p "$1" SHUTDOWN >/dev/null 2>&1 || true
  while redis-cli -p "$1" PING >/dev/null 2>&1; do sleep 0.05; done
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(date -u +%F)"
echo "seen: $("$SEEN" --version) ($(git rev-parse --short HEAD)); $(redis-server --version | cut -d' ' -f3)"
echo
echo "| fsync | pipeline | seen BF.ADD | redis SET | seen / redis | RedisBloom BF.ADD | seen / RedisBloom |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for policy in everysec always; do
  rm -rf "$TMP"/s "$TMP"/r "$TMP"/b
  seen_up "$TMP/s" $policy
  redis-cli -p $SPORT BF.RESERVE bf 0.001 100000000 >/dev/null
  redis_up "$TMP/r" --appendonly yes --appendfsync $policy
  for P in 1 64; do
    n=$((P == 1 ? 200000 : 3000000))
    [ $policy = always ] && [ $P = 1 ] && n=60000
    s=$(rps $SPORT $P $n BF.ADD bf __rand_int__)
    r=$(rps $RPORT $P $n SET key:__rand_int__ x)
    b="-"; br="-"
    if [ -n "$RB" ]; then
      down $RPORT
      redis_up "$TMP/b" --appendonly yes --appendfsync $policy --loadmodule "$RB"
      redis-cli -p $RPORT BF.RESERVE bf 0.001 100000000 >/dev/null
      b=$(rps $RPORT $P $n BF.ADD bf __rand_int__)
      br=$(printf '%.2f' "$(echo "$s / $b" | bc -l)")
      down $RPORT; rm -rf "$TMP/b"
      redis_up "$TMP/r" --appendonly yes --appendfsync $policy
    fi
    printf '| %s | %s | %.0f | %.0f | %.2f | %s | %s |\n' $policy $P "$s" "$r" "$(echo "$s / $r" | bc -l)" "$b" "$br"
  done
  down $SPORT; down $RPORT
done
[ -n "$RB" ] || exit 0

echo
# The filter: 10M random items and one known one.
fill() { # port
  redis-cli -p "$1" BF.RESERVE bf 0.001 100000000 >/dev/null
  redis-cli -p "$1" BF.ADD bf probe >/dev/null
  redis-benchmark -p "$1" -c 50 -P 64 -n 10000000 -r 100000000000 -q BF.ADD bf __rand_int__ >/dev/null
}
rm -rf "$TMP"/s "$TMP"/b
seen_up "$TMP/s" everysec; fill $SPORT; down $SPORT
redis_up "$TMP/b" --loadmodule "$RB" --dbfilename dump.rdb; fill $RPORT
redis-cli -p $RPORT SAVE >/dev/null; down $RPORT
first_answer() { # port command... : seconds from the start to BF.EXISTS bf probe = 1
  python3 - "$@" <<'PY'
import subprocess, sys, time, socket
port, cmd = int(sys.argv[1]), sys.argv[2:]
start = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
req = b"*3\r\n$9\r\nBF.EXISTS\r\n$2\r\nbf\r\n$5\r\nprobe\r\n"
while True:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(req)
            if s.recv(64).startswith(b":1"):
                break
    except OSError:
        pass
    time.sleep(0.001)
print(f"{time.monotonic() - start:.3f}")
PY
}
echo "| restart | seen (s) | RedisBloom (s) | seen / RedisBloom |"
echo "|---:|---:|---:|---:|"
for i in $(seq 1 9); do
  s=$(first_answer $SPORT "$SEEN" serve --dir "$TMP/s" --port $SPORT --save-interval 0)
  down $SPORT
  b=$(first_answer $RPORT redis-server --port $RPORT --dir "$TMP/b" --save '' --dbfilename dump.rdb --loadmodule "$RB")
  down $RPORT
  printf '| %d | %s | %s | %.2f |\n' "$i" "$s" "$b" "$(echo "$s / $b" | bc -l)"
done
echo
echo "seen data directory: $(du -sb "$TMP/s" | cut -f1) bytes ($(du -sb "$TMP/s/snapshots" | cut -f1) of snapshots, $(du -sb "$TMP/s/log" | cut -f1) of log)"
echo "RedisBloom RDB: $(stat -c %s "$TMP/b/dump.rdb") bytes"
