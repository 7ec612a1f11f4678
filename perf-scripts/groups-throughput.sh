#!/usr/bin/env bash
# Aggregate throughput against the number of broker groups: 1, 2 and 3
# groups of one node each on this machine (node i on CPU (i-1) mod 2, the
# load generator unpinned), the same topic spread over them, as fast as
# possible with 256 unacknowledged messages per producer. On a 2-CPU host
# the nodes and the load generator share the CPUs, so the curve flattens
# where the CPUs run out: it shows that the groups add up, not how far.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--groups LIST] [--duration SECS] [--queues N] [--producers N] [--out DIR]
  --groups LIST    group counts to run, comma-separated (default: 1,2,3)
  --duration SECS  measured seconds per run (default: 10; 2 s warm-up each)
  --queues N       the topic's queues, spread over the groups (default: 6)
  --producers N    producers (default: 4)
  --out DIR        keep every run's summary.json and logs here (default: a temp dir)
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
counts=1,2,3 duration=10 queues=6 producers=4 out="" bin=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --groups) counts=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --queues) queues=$2; shift 2 ;;
    --producers) producers=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
# shellcheck source=lib/processes.sh
source "$here/lib/processes.sh"
cluster_run_setup
trap stop_all EXIT

IFS=, read -r -a count_list <<<"$counts"
for n in "${count_list[@]}"; do
  run="groups-$n"
  start_etcd "$out/$run/etcd" "$out/$run.etcd.log"
  addrs=()
  for i in $(seq "$n"); do
    listen="127.0.0.$((80 + i)):$(free_port)"
    start_serve "$out/$run/g$i" "$listen" --cores $(((i - 1) % 2)) --segment-mib 64 --cache-mib 64 \
      --cluster "$etcd_url" --broker-group "g$i" --node "n$i" --insync-min 1
    addrs+=("$listen")
  done
  sleep 2 # every group has a leader and its shards recorded before the topic is placed
  echo "bench $run: as fast as possible for ${duration}s over $n broker group(s)" >&2
  "$bin/ringmq-bench" run --broker "$(IFS=,; echo "${addrs[*]}")" --queues "$queues" --producers "$producers" \
    --rate 0 --max-outstanding 256 --warmup 2s --duration "${duration}s" --out "$out/$run" >"$out/$run.log" 2>&1 ||
    echo "the $run run failed (see $out/$run.log)" >&2
  stop_all
  rm -rf "$out/$run"/g?/data "$out/$run/etcd" # gigabytes; the summary and logs stay
done

OUT="$out" COUNTS="$counts" python3 - <<'PY'
import json, os
out = os.environ["OUT"]
first = None
print(f"{'groups':>6} {'msgs/s':>9} {'MB/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'lost':>5} {'to 1 group':>10}")
for n in os.environ["COUNTS"].split(","):
    try:
        s = json.load(open(os.path.join(out, f"groups-{n}", "summary.json")))
    except OSError:
        print(f"{n:>6} (no result)")
        continue
    first = first or s["msgs_per_s"]
    e = s["e2e"]
    print(f"{n:>6} {s['msgs_per_s']:>9.0f} {s['mb_per_s']:>7.1f} "
          f"{e['p50_us'] / 1e3:>8.2f} {e['p99_us'] / 1e3:>8.2f} {s['lost']:>5} {s['msgs_per_s'] / first:>10.2f}")
print(f"runs in {out}")
PY
