#!/usr/bin/env bash
# Two brokers on the same CPUs, as on a shared host or in the tests' clusters:
# broker A under the load generator, broker B under the Kafka clients' test
# phases (create and delete topics, groups joining and leaving, compressed
# produce and fetch, configs), repeated. Prints the seconds in which the load
# generator received nothing, e2e percentiles, the shards' holds (the
# watchdog's log lines, by cause) and the kernel's workqueue lockups logged
# meanwhile. This is how the completion yield's unbounded sched_yield was
# found: 92 s of 150 without progress, the direct-I/O completion workqueue
# stuck for up to 204 s (see shards/src/log/completion_yield.rs).
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--seconds N] [--rate N] [--cores LIST] [-- SERVE FLAGS...]
  --seconds N   measured seconds (default: 150)
  --rate N      msgs/s offered to broker A (default: 20000)
  --cores LIST  CPUs both brokers and the clients share (default: 0,1)
  SERVE FLAGS   passed to both brokers, e.g. -- --completion-yield-us 0 --idle-spin-us 0
Needs the Kafka clients tests/run.sh installs (python3-kafka, confluent-kafka).
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
seconds=150 rate=20000 cores=0,1 flags=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --cores) cores=$2; shift 2 ;;
    --) shift; flags=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
/usr/bin/python3 -c 'import kafka, confluent_kafka' 2>/dev/null ||
  { echo "needs kafka-python and confluent-kafka (tests/run.sh installs them)" >&2; exit 1; }
(cd "$root" && cargo build --release -q -p ringmq -p ringmq-bench)
bin=$root/target/release
out=$(mktemp -d /var/tmp/shared-cores.XXXX)
clients=$root/tests/kafka_clients

# shellcheck source=lib/processes.sh
source "$here/lib/processes.sh"
trap stop_all EXIT

# start NAME PORT [serve flags...]: a broker on the shared CPUs, waited for.
start() {
  local name=$1 port=$2
  shift 2
  mkdir -p "$out/$name"
  "$bin/ringmq" serve --data-dir "$out/$name/data" --listen "127.0.0.1:$port" --cores "$cores" \
    --segment-mib 64 --cache-mib 64 "$@" "${flags[@]}" >"$out/$name/out" 2>"$out/$name/err" &
  pids+=($!)
  for _ in $(seq 200); do grep -q listening "$out/$name/out" 2>/dev/null && return 0; sleep 0.1; done
  echo "broker $name did not start (see $out/$name/err)" >&2
  exit 1
}

lockups_before=$(dmesg 2>/dev/null | grep -c "workqueue lockup" || true)
a=$(free_port) b=$(free_port) kb=$(free_port)
start a "$a"
start b "$b" --kafka-listen "127.0.0.1:$kb"
"$bin/ringmq-bench" run --broker "127.0.0.1:$a" --client-cores "$cores" --rate "$rate" --warmup 1s \
  --duration "${seconds}s" --drain-timeout 30s --out "$out/bench" >"$out/bench.log" 2>&1 &
bench=$!
end=$((SECONDS + seconds)) rounds=0
while ((SECONDS < end)); do
  rounds=$((rounds + 1))
  for phase in idempotent compressed seek group configs; do
    timeout 40 /usr/bin/python3 "$clients/python_confluent.py" "127.0.0.1:$kb" "$phase" >>"$out/clients.log" 2>&1 || true
  done
  timeout 40 /usr/bin/python3 "$clients/python_group.py" "127.0.0.1:$kb" >>"$out/clients.log" 2>&1 || true
  # Each round creates its topics again.
  timeout 40 /usr/bin/python3 - "127.0.0.1:$kb" >>"$out/clients.log" 2>&1 <<'PY' || true
import sys, kafka
a = kafka.KafkaAdminClient(bootstrap_servers=sys.argv[1], api_version=(2, 0))
names = [t for t in a.list_topics() if not t.startswith(("__", "%"))]
if names:
    a.delete_topics(names, timeout_ms=30000)
PY
done
wait "$bench" || echo "the load generator failed (see $out/bench.log)" >&2
stop_all
lockups=$(( $(dmesg 2>/dev/null | grep -c "workqueue lockup" || true) - lockups_before ))

plain() { sed 's/\x1b\[[0-9;]*m//g' "$@"; }
echo "flags: ${flags[*]:-(defaults)}; $seconds s at $rate msgs/s on CPUs $cores; $rounds rounds of the Kafka clients"
echo "seconds in which the load generator received nothing: $(plain "$out/bench.log" | grep measure | grep -c ' recv  *0/s' || true)"
python3 - "$out/bench/summary.json" <<'PY' || true
import json, sys
s = json.load(open(sys.argv[1]))
e = s["e2e"]
print(f"e2e p50 {e['p50_us'] / 1e3:.2f} ms, p99 {e['p99_us'] / 1e3:.2f} ms, p99.9 {e['p999_us'] / 1e3:.2f} ms; lost {s['lost']}")
PY
holds=$(plain "$out"/*/out "$out"/*/err | grep "was held" || true)
echo "shard holds: $(grep -c . <<<"$holds" || true), longest $(grep -o 'held_ms=[0-9.]*' <<<"$holds" | cut -d= -f2 | sort -n | tail -1) ms"
for cause in running blocked starved stolen; do
  echo "  $cause: $(grep -c "cause=\"$cause\"" <<<"$holds" || true)"
done
echo "kernel workqueue lockups logged: $lockups"
echo "logs in $out"
