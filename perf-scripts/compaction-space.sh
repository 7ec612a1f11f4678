#!/usr/bin/env bash
# A compacted topic's disk space stays bounded: one shard, one compacted
# partition, KEYS distinct keys each rewritten ROUNDS times (1 KiB values,
# a librdkafka producer through the Kafka listener). After each round it
# prints the log's sealed segment bytes, the compacted part's bytes (from
# /metrics) and the shard directory's size, against the bound
# KEYS x record bytes + the bytes written since the part's end (dirty).
#
#   perf-scripts/compaction-space.sh [--keys 20000] [--rounds 10] [--segment-mib 16]
set -euo pipefail
keys=20000 rounds=10 segment_mib=16
while [[ $# -gt 0 ]]; do
  case "$1" in
    --keys) keys=$2 ;;
    --rounds) rounds=$2 ;;
    --segment-mib) segment_mib=$2 ;;
    *) sed -n '2,9p' "$0" >&2; exit 2 ;;
  esac
  shift 2
done
root=$(cd "$(dirname "$0")/.." && pwd)
(cd "$root" && cargo build --release -q -p ringmq)
work=$(mktemp -d "$root/target/compaction-space.XXXXXX")
broker_pid=
trap '[[ -n $broker_pid ]] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid"; [[ -n ${KEEP_LOG:-} ]] && cp "$work/err" "$KEEP_LOG"; rm -rf "$work"' EXIT

port=$((20000 + RANDOM % 20000))
kafka=127.0.0.1:$port admin=127.0.0.1:$((port + 2))
RUST_LOG=${RUST_LOG:-warn} "$root/target/release/ringmq" serve --data-dir "$work/data" --listen 127.0.0.1:0 --cores 0 \
  --kafka-listen "$kafka" --admin-listen "$admin" --segment-mib "$segment_mib" --cache-mib 64 \
  --compaction-check-ms 1000 --retention-check-ms 2000 >"$work/out" 2>"$work/err" &
broker_pid=$!
for _ in $(seq 100); do grep -q "listening" "$work/out" 2>/dev/null && break; sleep 0.1; done
grep -q "listening" "$work/out" || { echo "the broker did not start:" >&2; cat "$work/err" >&2; exit 1; }

/usr/bin/python3 - "$kafka" "$admin" "$work/data" "$keys" "$rounds" <<'EOF'
import subprocess, sys, time, urllib.request
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

boot, admin_addr, data, keys, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
admin = AdminClient({"bootstrap.servers": boot})
for f in admin.create_topics([NewTopic("kv", 1, 1, config={"cleanup.policy": "compact"})]).values():
    f.result(30)

def metric(name, label=""):
    text = urllib.request.urlopen("http://%s/public_metrics" % admin_addr, timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and label in line:
            total += float(line.rsplit(" ", 1)[1])
    return total

def du(path):
    return int(subprocess.run(["du", "-sb", path], capture_output=True, text=True).stdout.split()[0])

value = b"v" * 1000
p = ck.Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5, "batch.size": 262144})
record = None
print("%5s %10s %12s %12s %12s %12s %8s" % ("round", "written", "sealed_MB", "compacted_MB", "dir_MB", "bound_MB", "ratio"))
written = 0
for r in range(rounds):
    for k in range(keys):
        p.produce("kv", key=b"key-%08d" % k, value=value, partition=0)
        if k % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    written += keys
    # Let the compactor's next passes run.
    time.sleep(4)
    compacted = metric("ringmq_compacted_bytes")
    end = metric("ringmq_compacted_end_offset")
    sealed = metric("ringmq_storage_segment_bytes", 'state="sealed"')
    record = record or 1000 + 12 + 40 + 40  # value, key, record and batch framing
    bound = keys * record + (written - end) * record
    dir_bytes = du(data)
    print("%5d %10d %12.1f %12.1f %12.1f %12.1f %8.2f" % (r + 1, written, sealed / 1e6, compacted / 1e6,
          dir_bytes / 1e6, bound / 1e6, (sealed + compacted) / bound))
print("ratio: (sealed segments + compacted part) / (keys x record + dirty); the directory adds the active and spare segments, the pool of retired ones and index files")
EOF
