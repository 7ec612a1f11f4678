#!/usr/bin/env bash
# Drives one broker (ringmq serve, CPU 0) with the bundled load generator
# (CPU 1) over the native protocol and over its Kafka listener (librdkafka),
# alternating, and prints each run's msgs/s, e2e p50/p99, the broker's CPU
# per message, and the Kafka runs as ratios of the native ones (medians of
# the rounds). Two workloads: as fast as possible (durable msgs/s) and an
# open-loop 10,000 msgs/s (latency). On a 2-CPU host librdkafka's threads and
# the native client share the load generator's CPU: read the ratios.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--rounds N] [--duration SECS] [--rate N] [--out DIR]
  --rounds N       native/kafka pairs per workload (default: 3)
  --duration SECS  measured seconds per run (default: 10; 2 s warm-up each)
  --rate N         msgs/s of the latency workload (default: 10000)
  --out DIR        keep every run's summary.json and logs here (default: a temp dir)
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=3 duration=10 rate=10000 out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
pkg-config --exists rdkafka || { echo "needs librdkafka (Debian: librdkafka-dev)" >&2; exit 1; }
[[ -n $out ]] || out=$(mktemp -d)
mkdir -p "$out"
(cd "$root" && cargo build --release -q -p ringmq && cargo build --release -q -p ringmq-bench --features kafka)
bin=$root/target/release

broker=""
stop_broker() {
  [[ -n $broker ]] && { kill "$broker" 2>/dev/null || true; wait "$broker" 2>/dev/null || true; }
  broker=""
}
trap stop_broker EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run NAME PROTOCOL RATE: a fresh broker, one load-generator run, the broker's CPU ticks over it.
run() {
  local name=$1 protocol=$2 offered=$3 dir=$out/$1
  mkdir -p "$dir"
  local port kafka
  port=$(free_port) kafka=$(free_port)
  "$bin/ringmq" serve --data-dir "$dir/data" --listen "127.0.0.1:$port" --kafka-listen "127.0.0.1:$kafka" \
    --cores 0 --segment-mib 256 --cache-mib 128 >"$dir/serve.out" 2>"$dir/serve.err" &
  broker=$!
  for _ in $(seq 200); do grep -q listening "$dir/serve.out" 2>/dev/null && break; sleep 0.1; done
  echo "run $name: $protocol at ${offered:-max} msgs/s for ${duration}s" >&2
  local before after
  before=$(cpu_ticks "$broker")
  "$bin/ringmq-bench" run --broker "127.0.0.1:$port" --kafka-broker "127.0.0.1:$kafka" --protocol "$protocol" \
    --client-cores 1 --rate "$offered" --warmup 2s --duration "${duration}s" --out "$dir" >"$dir/bench.log" 2>&1 \
    || echo "the $name run failed (see $dir/bench.log)" >&2
  after=$(cpu_ticks "$broker")
  echo $((after - before)) >"$dir/broker-ticks"
  stop_broker
  rm -rf "$dir/data"
}

for workload in max rate; do
  offered=$([[ $workload == max ]] && echo 0 || echo "$rate")
  for r in $(seq "$rounds"); do
    run "$workload-native-$r" native "$offered"
    run "$workload-kafka-$r" kafka "$offered"
  done
done

OUT="$out" ROUNDS="$rounds" TICK="$(getconf CLK_TCK)" python3 - <<'PY'
import json, os, statistics
out, rounds, tick = os.environ["OUT"], int(os.environ["ROUNDS"]), int(os.environ["TICK"])
def load(name):
    try:
        s = json.load(open(os.path.join(out, name, "summary.json")))
        s["cpu_us_per_msg"] = int(open(os.path.join(out, name, "broker-ticks")).read()) / tick * 1e6 / max(1, s["received"])
        return s
    except (OSError, ValueError):
        return None
print(f"{'run':<14} {'msgs/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'broker us/msg':>14} {'lost':>5}")
ratios = {}
for workload in ["max", "rate"]:
    for r in range(1, rounds + 1):
        pair = {p: load(f"{workload}-{p}-{r}") for p in ["native", "kafka"]}
        for p, s in pair.items():
            if s is None:
                print(f"{workload}-{p}-{r:<5} (no result)")
                continue
            e = s["e2e"]
            print(f"{workload + '-' + p + '-' + str(r):<14} {s['msgs_per_s']:>9.0f} {e['p50_us'] / 1e3:>8.3f} {e['p99_us'] / 1e3:>8.3f} {s['cpu_us_per_msg']:>14.2f} {s['lost']:>5}")
        n, k = pair["native"], pair["kafka"]
        if n and k:
            for key, value in [("msgs/s", k["msgs_per_s"] / n["msgs_per_s"]),
                               ("p50", k["e2e"]["p50_us"] / max(1, n["e2e"]["p50_us"])),
                               ("p99", k["e2e"]["p99_us"] / max(1, n["e2e"]["p99_us"])),
                               ("broker us/msg", k["cpu_us_per_msg"] / n["cpu_us_per_msg"])]:
                ratios.setdefault((workload, key), []).append(value)
print("kafka / native, median of the rounds:")
for (workload, key), values in ratios.items():
    print(f"  {workload:<5} {key:<14} {statistics.median(values):.2f}   ({', '.join(f'{v:.2f}' for v in values)})")
print(f"runs in {out}")
PY
