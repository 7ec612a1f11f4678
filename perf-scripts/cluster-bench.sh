#!/usr/bin/env bash
# Runs the bundled load generator against a single node and against a
# 3-node broker group on this machine (sync, then async replication), in one
# go, and prints e2e p50/p99/p99.9 and msgs/s of each as a ratio of the
# single node's. On a 2-CPU host the three nodes share the CPUs with each
# other and the load generator: read the ratios, not the absolute figures.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--rate N] [--duration SECS] [--out DIR]
  --rate N         msgs/s offered (default: 5000)
  --duration SECS  measured seconds per run (default: 10; 2 s warm-up each)
  --out DIR        keep every run's summary.json and logs here (default: a temp dir)
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rate=5000 duration=10 out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
command -v etcd >/dev/null || { echo "needs etcd (Debian: etcd-server)" >&2; exit 1; }
[[ -n $out ]] || out=$(mktemp -d)
mkdir -p "$out"
(cd "$root" && cargo build --release -q -p ringmq -p ringmq-bench)
bin=$root/target/release

# shellcheck source=lib/processes.sh
source "$here/lib/processes.sh"
trap stop_all EXIT

# start_node DIR LISTEN [serve flags...]: starts `ringmq serve` on CPU 0 and waits for its listening line.
start_node() {
  local dir=$1 listen=$2
  shift 2
  mkdir -p "$dir"
  "$bin/ringmq" serve --data-dir "$dir/data" --listen "$listen" --cores 0 --segment-mib 64 --cache-mib 64 "$@" \
    >"$dir/serve.out" 2>"$dir/serve.err" &
  pids+=($!)
  for _ in $(seq 200); do grep -q listening "$dir/serve.out" 2>/dev/null && return 0; sleep 0.1; done
  echo "a node did not start (see $dir/serve.err)" >&2
  exit 1
}

# bench NAME BOOTSTRAP: one load-generator run on CPU 1, its summary in $out/NAME.
bench() {
  echo "bench $1: $rate msgs/s for ${duration}s against $2" >&2
  "$bin/ringmq-bench" run --broker "$2" --client-cores 1 --rate "$rate" --warmup 2s --duration "${duration}s" \
    --out "$out/$1" >"$out/$1.log" 2>&1 || echo "the $1 run failed (see $out/$1.log)" >&2
}

start_node "$out/single" "127.0.0.1:$(free_port)"
bench single "$(sed -n 's/^ringmq listening on \([^ ]*\).*/\1/p' "$out/single/serve.out")"
stop_all

for mode in sync async; do
  start_etcd "$out/$mode/etcd" "$out/$mode.etcd.log"
  addrs=()
  for i in 1 2 3; do
    listen="127.0.0.$((70 + i)):$(free_port)"
    start_node "$out/$mode/n$i" "$listen" --cluster "$etcd_url" --broker-group bench --node "n$i" \
      --replication "$mode"
    addrs+=("$listen")
  done
  sleep 2 # the followers join the in-sync set once caught up
  "$bin/ringmq" cluster status --cluster "$etcd_url" | grep '^broker_group=.* leader=' >&2 || true
  bench "$mode" "$(IFS=,; echo "${addrs[*]}")" &
  bench_pid=$!
  # Mid-run: the leader's view of each follower's lag (bytes behind, ms since its last fetch).
  sleep $((duration / 2 + 2))
  "$bin/ringmq" cluster status --cluster "$etcd_url" | grep '^broker_group=.* \(leader\|follower\)=' \
    >"$out/$mode.status" || true
  wait "$bench_pid"
  stop_all
done

OUT="$out" python3 - <<'PY'
import json, os
out = os.environ["OUT"]
def load(name):
    try:
        return json.load(open(os.path.join(out, name, "summary.json")))
    except OSError:
        return None
single = load("single")
print(f"{'run':<8} {'msgs/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} {'lost':>5}   ratios to single (msgs/s, p50, p99, p99.9)")
for name in ["single", "sync", "async"]:
    s = load(name)
    if s is None:
        print(f"{name:<8} (no result)")
        continue
    e = s["e2e"]
    row = f"{name:<8} {s['msgs_per_s']:>9.0f} {e['p50_us'] / 1e3:>8.2f} {e['p99_us'] / 1e3:>8.2f} {e['p999_us'] / 1e3:>9.2f} {s['lost']:>5}"
    if single and name != "single":
        se = single["e2e"]
        ratios = [s["msgs_per_s"] / single["msgs_per_s"]] + [e[k] / max(1, se[k]) for k in ("p50_us", "p99_us", "p999_us")]
        row += "   " + "  ".join(f"{r:.2f}" for r in ratios)
    print(row)
for mode in ["sync", "async"]:
    try:
        print(f"{mode}, mid-run:\n  " + open(os.path.join(out, mode + ".status")).read().strip().replace("\n", "\n  "))
    except OSError:
        pass
print(f"runs in {out}")
PY
