#!/usr/bin/env bash
# Kafka producers' compression, kept: for each of none, lz4 and zstd, a
# fresh broker (CPU 0) takes 1 KiB JSON-like records (ringmq-bench
# --payload json) from librdkafka producers (CPU 1, acks=all) as fast as
# they are acknowledged. Per run: the durable payload MB/s, and the bytes
# the log stored per record (the broker's ringmq_storage_appended_bytes over
# ringmq_storage_appended_records, read from its /metrics before it stops)
# and the broker's CPU per record;
# then each codec against none. With --old-broker BIN the same runs go
# against another build too (e.g. the commit before compression was kept),
# alternating, for before and after.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=1 duration=10 out="" old=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --old-broker) old=$2; shift 2 ;;
    -h|--help)
      echo "usage: $0 [--rounds N] [--duration SECS] [--out DIR] [--old-broker BIN]"
      exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[[ -n $out ]] || out=$(mktemp -d)
mkdir -p "$out"
pkg-config --exists rdkafka || { echo "needs librdkafka (Debian: librdkafka-dev)" >&2; exit 1; }
(cd "$root" && cargo build --release -q -p ringmq && cargo build --release -q -p ringmq-bench --features kafka)
bin=$root/target/release
source "$here/lib/processes.sh" # free_port

broker=""
stop_broker() {
  [[ -n $broker ]] && { kill "$broker" 2>/dev/null || true; wait "$broker" 2>/dev/null || true; }
  broker=""
}
trap stop_broker EXIT

# run NAME BROKER_BIN CODEC: one broker, one load-generator run, the broker's counters.
run() {
  local name=$1 serve=$2 codec=$3 dir=$out/$1
  mkdir -p "$dir"
  local port kafka admin
  port=$(free_port) kafka=$(free_port) admin=$(free_port)
  "$serve" serve --data-dir "$dir/data" --listen "127.0.0.1:$port" --kafka-listen "127.0.0.1:$kafka" \
    --admin-listen "127.0.0.1:$admin" --cores 0 --segment-mib 256 --cache-mib 128 \
    >"$dir/serve.out" 2>"$dir/serve.err" &
  broker=$!
  for _ in $(seq 200); do grep -q listening "$dir/serve.out" 2>/dev/null && break; sleep 0.1; done
  echo "run $name: $codec for ${duration}s" >&2
  local before after
  before=$(awk '{print $14 + $15}' "/proc/$broker/stat")
  "$bin/ringmq-bench" run --client-cores 1 --warmup 2s --duration "${duration}s" --out "$dir" \
    --broker "127.0.0.1:$port" --kafka-broker "127.0.0.1:$kafka" --protocol kafka --rate 0 \
    --payload json --message-size 1024 --kafka-compression "$codec" >"$dir/bench.log" 2>&1 ||
    echo "the $name run failed (see $dir/bench.log)" >&2
  after=$(awk '{print $14 + $15}' "/proc/$broker/stat")
  echo $((after - before)) >"$dir/broker-ticks"
  curl -s "http://127.0.0.1:$admin/metrics" >"$dir/metrics.txt" || true
  stop_broker
  rm -rf "$dir/data"
}

builds=(new)
[[ -n $old ]] && builds+=(old)
for r in $(seq "$rounds"); do
  for codec in none lz4 zstd; do
    for b in "${builds[@]}"; do
      serve=$bin/ringmq
      [[ $b == old ]] && serve=$old
      run "$b-$codec-$r" "$serve" "$codec"
    done
  done
done

OUT="$out" ROUNDS="$rounds" BUILDS="${builds[*]}" TICK="$(getconf CLK_TCK)" python3 - <<'PY'
import json, os, re, statistics
out, rounds, builds = os.environ["OUT"], int(os.environ["ROUNDS"]), os.environ["BUILDS"].split()
tick = int(os.environ["TICK"])
def counter(text, name):
    return sum(float(v) for v in re.findall(rf"^{name}(?:_total)?(?:{{[^}}]*}})? (\S+)$", text, re.M))
def load(name):
    try:
        s = json.load(open(os.path.join(out, name, "summary.json")))
        m = open(os.path.join(out, name, "metrics.txt")).read()
        records = counter(m, "ringmq_storage_appended_records")
        ticks = int(open(os.path.join(out, name, "broker-ticks")).read())
        return {"mb_s": s["msgs_per_s"] * s["message_size"] / 1e6, "msgs_s": s["msgs_per_s"],
                "bytes_per_msg": counter(m, "ringmq_storage_appended_bytes") / max(1, records), "lost": s["lost"],
                "cpu_us": ticks / tick * 1e6 / max(1, s["received"])}
    except (OSError, ValueError, KeyError):
        return None
print(f"{'run':<14} {'msgs/s':>9} {'payload MB/s':>13} {'stored B/msg':>13} {'broker us/msg':>14} {'lost':>5}")
table = {}
for r in range(1, rounds + 1):
    for codec in ["none", "lz4", "zstd"]:
        for b in builds:
            s = load(f"{b}-{codec}-{r}")
            if s is None:
                print(f"{b}-{codec}-{r}: no result")
                continue
            table.setdefault((b, codec), []).append(s)
            print(f"{b + '-' + codec + '-' + str(r):<14} {s['msgs_s']:>9.0f} {s['mb_s']:>13.1f} {s['bytes_per_msg']:>13.0f} {s['cpu_us']:>14.2f} {s['lost']:>5}")
med = lambda b, c, k: statistics.median(x[k] for x in table.get((b, c), [{k: float("nan")}]))
for b in builds:
    for codec in ["lz4", "zstd"]:
        print(f"{b} {codec} / none: payload MB/s {med(b, codec, 'mb_s') / med(b, 'none', 'mb_s'):.2f}, "
              f"stored bytes per record {med(b, codec, 'bytes_per_msg') / med(b, 'none', 'bytes_per_msg'):.2f}, "
              f"broker CPU per record {med(b, codec, 'cpu_us') / med(b, 'none', 'cpu_us'):.2f}")
if "old" in builds:
    for codec in ["none", "lz4", "zstd"]:
        print(f"new / old, {codec}: payload MB/s {med('new', codec, 'mb_s') / med('old', codec, 'mb_s'):.2f}, "
              f"stored bytes per record {med('new', codec, 'bytes_per_msg') / med('old', codec, 'bytes_per_msg'):.2f}, "
              f"broker CPU per record {med('new', codec, 'cpu_us') / med('old', codec, 'cpu_us'):.2f}")
print(f"runs in {out}")
PY
