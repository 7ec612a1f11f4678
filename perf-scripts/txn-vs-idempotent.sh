#!/usr/bin/env bash
# Kafka transactions' cost in produce throughput: the Apache Java client
# (one producer, acks=all, 1 KiB records, batch.size 256 KiB, linger.ms 5)
# idempotent against transactional (a commit every --per-txn records: the
# markers of every partition plus the coordinator's two state records),
# alternating on a fresh broker each run (CPU 0; the client on CPU 1), and
# the ratio transactional / idempotent of the medians. Needs a JDK and the
# Java client's jars (tests/run.sh puts them in ~/.cache/ringmq-tests/jars,
# or set RINGMQ_JARS).
#   perf-scripts/txn-vs-idempotent.sh [--rounds N] [--records N] [--per-txn N] [--partitions N]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=3 records=200000 per_txn=1000 partitions=4
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --records) records=$2; shift 2 ;;
    --per-txn) per_txn=$2; shift 2 ;;
    --partitions) partitions=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=lib/java-client.sh
source "$here/lib/java-client.sh" # java_setup, start_broker, stop_broker
java_setup

# run MODE ROUND: a fresh broker, one producer run; prints its records/s.
run() {
  local mode=$1 dir=$out/$1-$2
  mkdir -p "$dir"
  start_broker "$dir" "$partitions"
  taskset -c 1 java -cp "$jars$out/classes" TxnThroughput "127.0.0.1:$kafka" tput "$mode" "$records" "$per_txn" \
    2>"$dir/java.err" | tee -a "$out/results" >&2
  stop_broker
  rm -rf "$dir/data"
}

for r in $(seq "$rounds"); do
  run idempotent "$r"
  run transactional "$r"
done
python3 - "$out/results" "$per_txn" <<'PY'
import re, statistics, sys
rates = {}
for line in open(sys.argv[1]):
    mode = line.split()[0]
    rates.setdefault(mode, []).append(float(re.search(r"records_per_s=(\S+)", line).group(1)))
idem, txn = statistics.median(rates["idempotent"]), statistics.median(rates["transactional"])
print(f"idempotent    {idem:>10.0f} records/s (median of {len(rates['idempotent'])})")
print(f"transactional {txn:>10.0f} records/s, a commit every {sys.argv[2]} records")
print(f"transactional / idempotent: {txn / idem:.2f}")
PY
