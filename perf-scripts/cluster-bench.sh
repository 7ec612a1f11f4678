#!/usr/bin/env bash
# Runs the bundled load generator against a single node and against a
# 3-node broker group on this machine (sync, then async replication), round
# after round at each rate, and prints e2e p50/p99/p99.9 and msgs/s of each
# as a ratio of the single node's in the same round, with the median ratio
# over the rounds. On a 2-CPU host the three nodes share one CPU (the load
# generator has the other): read the ratios, not the absolute figures, and
# the async row as the floor the sharing alone sets.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--rates LIST] [--rounds N] [--duration SECS] [--bin DIR] [--out DIR]
  --rates LIST     msgs/s offered, comma-separated; 0 is as fast as possible with
                   256 unacknowledged messages per producer (default: 5000)
  --rate N         the same as --rates N
  --rounds N       single, sync and async runs per rate, in turn (default: 1)
  --duration SECS  measured seconds per run (default: 10; 2 s warm-up each)
  --bin DIR        take ringmq and ringmq-bench from DIR instead of building this tree
  --out DIR        keep every run's summary.json and logs here (default: a temp dir); the
                   runs' data directories are deleted after each run (a run as fast as
                   possible writes gigabytes)
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rates=5000 rounds=1 duration=10 out="" bin=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rates | --rate) rates=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
# shellcheck source=lib/processes.sh
source "$here/lib/processes.sh"
cluster_run_setup
trap stop_all EXIT

# start_node DIR LISTEN [serve flags...]: a broker on CPU 0, waited for.
start_node() {
  start_serve "$1" "$2" --cores 0 --segment-mib 64 --cache-mib 64 "${@:3}"
}

# bench RUN BOOTSTRAP RATE: one load-generator run on CPU 1, its summary in $out/RUN.
bench() {
  local limit=()
  [[ $3 == 0 ]] && limit=(--max-outstanding 256)
  echo "bench $1: ${3/#0/max} msgs/s for ${duration}s against $2" >&2
  "$bin/ringmq-bench" run --broker "$2" --client-cores 1 --rate "$3" "${limit[@]}" --warmup 2s \
    --duration "${duration}s" --out "$out/$1" >"$out/$1.log" 2>&1 || echo "the $1 run failed (see $out/$1.log)" >&2
}

# cluster RUN MODE RATE: a fresh 3-node group replicating in MODE, benched, then stopped.
cluster() {
  local run=$1 mode=$2 rate=$3 addrs=() i listen
  start_etcd "$out/$run/etcd" "$out/$run.etcd.log"
  for i in 1 2 3; do
    listen="127.0.0.$((70 + i)):$(free_port)"
    start_node "$out/$run/n$i" "$listen" --cluster "$etcd_url" --broker-group bench --node "n$i" --replication "$mode"
    addrs+=("$listen")
  done
  sleep 2 # the followers join the in-sync set once caught up
  bench "$run" "$(IFS=,; echo "${addrs[*]}")" "$rate" &
  local bench_pid=$!
  # Mid-run: the leader's view of each follower's lag (bytes behind, ms since its last fetch).
  sleep $((duration / 2 + 2))
  "$bin/ringmq" cluster status --cluster "$etcd_url" | grep '^broker_group=.* \(leader\|follower\)=' \
    >"$out/$run.status" || true
  wait "$bench_pid"
  stop_all
  rm -rf "$out/$run"/n?/data "$out/$run/etcd"
}

IFS=, read -r -a rate_list <<<"$rates"
for rate in "${rate_list[@]}"; do
  for round in $(seq "$rounds"); do
    start_node "$out/single-$rate-$round" "127.0.0.1:$(free_port)"
    bench "single-$rate-$round" "$(sed -n 's/^ringmq listening on \([^ ]*\).*/\1/p' "$out/single-$rate-$round/serve.out")" "$rate"
    stop_all
    rm -rf "$out/single-$rate-$round/data"
    for mode in sync async; do cluster "$mode-$rate-$round" "$mode" "$rate"; done
  done
done

OUT="$out" RATES="$rates" ROUNDS="$rounds" python3 - <<'PY'
import json, os, statistics
out, rounds = os.environ["OUT"], int(os.environ["ROUNDS"])
def load(name):
    try:
        return json.load(open(os.path.join(out, name, "summary.json")))
    except OSError:
        return None
keys = ("p50_us", "p99_us", "p999_us")
for rate in os.environ["RATES"].split(","):
    label = "as fast as possible (256 unacknowledged per producer)" if rate == "0" else f"{rate} msgs/s"
    print(f"== {label}")
    print(f"{'run':<14} {'msgs/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} {'lost':>5}   to single: msgs/s  p50  p99  p99.9")
    ratios = {"sync": [], "async": []}
    for r in range(1, rounds + 1):
        single = load(f"single-{rate}-{r}")
        for mode in ["single", "sync", "async"]:
            name = f"{mode}-{rate}-{r}"
            s = load(name)
            if s is None:
                print(f"{name:<14} (no result)")
                continue
            e = s["e2e"]
            row = f"{name:<14} {s['msgs_per_s']:>9.0f} {e['p50_us'] / 1e3:>8.2f} {e['p99_us'] / 1e3:>8.2f} {e['p999_us'] / 1e3:>9.2f} {s['lost']:>5}"
            if single and mode != "single":
                se = single["e2e"]
                rs = [s["msgs_per_s"] / single["msgs_per_s"]] + [e[k] / max(1, se[k]) for k in keys]
                ratios[mode].append(rs)
                row += "   " + "  ".join(f"{x:.2f}" for x in rs)
            print(row)
    for mode, rs in ratios.items():
        if rs:
            med = [statistics.median(col) for col in zip(*rs)]
            print(f"median {mode:<7} over {len(rs)} round(s): msgs/s {med[0]:.2f}  p50 {med[1]:.2f}  p99 {med[2]:.2f}  p99.9 {med[3]:.2f}")
    for r in range(1, rounds + 1):
        for mode in ["sync", "async"]:
            try:
                status = open(os.path.join(out, f"{mode}-{rate}-{r}.status")).read().strip()
                print(f"{mode}-{rate}-{r} mid-run:\n  " + status.replace("\n", "\n  "))
            except OSError:
                pass
print(f"runs in {out}")
PY
