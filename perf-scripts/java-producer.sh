#!/usr/bin/env bash
# The Apache Java client's producer against ringmq's Kafka listener, as a
# Kafka user runs it: one producer (CPU 1), acks=all, idempotent, linger.ms
# 5, 1 KiB records, batch.size 16 KiB (the client's default) against 256
# KiB, alternating, a fresh broker (one shard, CPU 0) per run. Prints
# records/s and what bounds it. The client keeps at most 5 Produce
# requests in flight per connection (max.in.flight.requests.per.connection,
# 5 at most with idempotence), and each waits for the durable write of its
# batches; so records/s <= connections x 5 x records per request / request
# time. The broker's metrics give records per request and the mean durable
# append time (arrival at the storage engine to durable), which stands for
# the request time (a lower bound of it: the wire and the client add to
# it). Against that bound: the requests in flight on average (Little's law:
# records/s x append time / records per request; 5 would mean the bound
# holds it) and the JVM's CPU over the run (1.0: the client's one CPU is
# full). Needs a JDK and the Java client's jars (tests/run.sh puts them in
# ~/.cache/ringmq-tests/jars, or set RINGMQ_JARS).
#   perf-scripts/java-producer.sh [--rounds N] [--records N] [--partitions N]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=3 records=1000000 partitions=4
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --records) records=$2; shift 2 ;;
    --partitions) partitions=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
command -v curl >/dev/null || { echo "needs curl" >&2; exit 1; }
# shellcheck source=lib/java-client.sh
source "$here/lib/java-client.sh" # java_setup, start_broker, stop_broker
java_setup

# run BATCH ROUND: a fresh broker, one producer run; its line and the broker's metrics after it.
run() {
  local batch=$1 dir=$out/$1-$2 admin
  mkdir -p "$dir"
  admin=$(free_port)
  start_broker "$dir" "$partitions" --admin-listen "127.0.0.1:$admin"
  curl -s "http://127.0.0.1:$admin/metrics" >"$dir/before.txt"
  taskset -c 1 java -cp "$jars$out/classes" TxnThroughput "127.0.0.1:$kafka" tput idempotent "$records" 1 "$batch" \
    2>"$dir/java.err" | tee "$dir/result" >&2
  curl -s "http://127.0.0.1:$admin/metrics" >"$dir/after.txt"
  stop_broker
  rm -rf "$dir/data"
}

for r in $(seq "$rounds"); do
  run 16384 "$r"
  run 262144 "$r"
done
OUT="$out" ROUNDS="$rounds" python3 - <<'PY'
import os, re, statistics
out, rounds = os.environ["OUT"], int(os.environ["ROUNDS"])
def metric(path, name, labels=""):
    """The sum over its label sets of `name` whose labels contain `labels`."""
    total = 0.0
    for line in open(path):
        m = re.match(r"^(\w+)(\{[^}]*\})? (\S+)$", line.strip())
        if m and m.group(1) == name and labels in (m.group(2) or ""):
            total += float(m.group(3))
    return total
def delta(d, name, labels=""):
    return metric(f"{d}/after.txt", name, labels) - metric(f"{d}/before.txt", name, labels)
print(f"{'batch.size':>10} {'records/s':>10} {'produce reqs':>12} {'records/req':>11} {'append ms':>9} "
      f"{'bound rec/s':>11} {'in flight':>9} {'client CPU':>10}")
for batch in [16384, 262144]:
    rows = []
    for r in range(1, rounds + 1):
        d = f"{out}/{batch}-{r}"
        try:
            said = open(f"{d}/result").read()
            rate, seconds, cpu = (float(re.search(f"{k}=(\\S+)", said).group(1)) for k in ["records_per_s", "seconds", "cpu_s"])
        except (OSError, AttributeError):
            print(f"{batch:>10} round {r}: no result (see {d}/java.err)")
            continue
        requests = delta(d, "ringmq_requests_total", 'api="kafka_Produce"')
        records = delta(d, "ringmq_storage_appended_records_total")
        appends = delta(d, "ringmq_storage_append_seconds_count")
        append_s = delta(d, "ringmq_storage_append_seconds_sum") / max(1, appends)
        per_request = records / max(1, requests)
        # One connection (one shard), 5 requests in flight on it.
        bound = 5 * per_request / max(append_s, 1e-9)
        in_flight = rate * append_s / max(per_request, 1e-9)
        rows.append((rate, requests, per_request, append_s * 1e3, bound, in_flight, cpu / seconds))
    for r, row in enumerate(rows + [tuple(statistics.median(c) for c in zip(*rows))] if rows else []):
        name = "median" if r == len(rows) else str(batch)
        print(f"{name:>10} {row[0]:>10.0f} {row[1]:>12.0f} {row[2]:>11.1f} {row[3]:>9.3f} {row[4]:>11.0f} "
              f"{row[5]:>9.2f} {row[6]:>10.2f}")
print("bound: 5 requests in flight x records per request / mean durable append time (one connection); "
      "in flight: records/s x append time / records per request; client CPU: the JVM's CPU seconds per second "
      "(CPU time includes its start, the run's seconds do not)")
print(f"runs in {out}")
PY
