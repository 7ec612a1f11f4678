#!/usr/bin/env bash
# How long retention holds a shard's thread: one shard with 1 GiB segments
# and --retention-gib 1 takes a durable load that writes several segments,
# waits for a retention pass to delete the old ones, and prints the shard's
# stall stats (wake-ups of its probe later than --stall-threshold-ms, and
# the longest), beside the same load with retention off.
#
#   perf-scripts/retention-stalls.sh [--seconds 25] [--rate 200000] [--broker-cores 1] [--client-cores 0]
# KEEP_LOGS=DIR keeps each broker's log there.
set -euo pipefail
seconds=25 rate=200000 bcores=1 ccores=0
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/perf-scripts/lib/broker-under-load.sh"
while [[ $# -gt 0 ]]; do
  load_flag "$1" "${2:-}" || { sed -n '2,9p' "$0" >&2; exit 2; }
  shift 2
done
(cd "$root" && cargo build --release -q -p ringmq -p ringmq-bench)
work=$(mktemp -d "$root/target/retention-stalls.XXXXXX")
broker_pid=
trap '[[ -n $broker_pid ]] && kill "$broker_pid" 2>/dev/null; rm -rf "$work"' EXIT

# run NAME SERVE_FLAGS...: the load against a fresh broker; prints its stall line.
run() {
  local name=$1 addr
  shift
  RUST_LOG=info "$root/target/release/ringmq" serve --data-dir "$work/$name" --listen 127.0.0.1:0 \
    --cores "$bcores" --segment-mib 1024 --cache-mib 128 "$@" >"$work/$name.out" 2>"$work/$name.err" &
  broker_pid=$!
  for _ in $(seq 100); do grep -q listening "$work/$name.out" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/^ringmq listening on \([^ ]*\).*/\1/p' "$work/$name.out")
  [[ -n $addr ]] || { echo "the broker did not start:" >&2; cat "$work/$name.err" >&2; exit 1; }
  "$root/target/release/ringmq-bench" run --broker "$addr" --client-cores "$ccores" --rate "$rate" \
    --warmup 2s --duration "${seconds}s" >"$work/$name.bench" 2>&1 || true
  if [[ $name == retention ]]; then
    # Retention runs at rollovers past the size bound and every 60 s: wait (at most 150 s) for a pass.
    for _ in $(seq 300); do grep -q "retention retired old data" "$work/$name.err" && break; sleep 0.5; done
    grep -q "retention retired old data" "$work/$name.err" || echo "no retention pass retired anything" >&2
  fi
  kill -TERM "$broker_pid"
  wait "$broker_pid" || true
  broker_pid=
  sed -i 's/\x1b\[[0-9;]*m//g' "$work/$name.err"
  local deleted stall
  deleted=$(grep -o 'segments=[0-9]*' "$work/$name.err" | head -1 || true)
  stall=$(grep -o 'stalls=[0-9]* longest_stall_ms=[0-9.]*' "$work/$name.err" | head -1)
  printf '%-10s %-12s %s\n' "$name" "${deleted:-segments=0}" "$stall"
  echo "           backtraces logged: $(grep -c "stall-detector" "$work/$name.err" || true)"
  [[ -n ${KEEP_LOGS:-} ]] && cp "$work/$name.err" "$KEEP_LOGS/$name.err"
  rm -rf "${work:?}/$name"
}

echo "one shard on CPU $bcores, $rate msgs/s of 1 KiB for ${seconds}s, 1 GiB segments"
run retention --retention-gib 1
run baseline
