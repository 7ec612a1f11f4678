#!/usr/bin/env bash
# What moving a queue costs the producers of other queues: two broker
# groups of one node each (node 1 on CPU 0, node 2 on CPU 1), a queue of
# `--fill-secs` of writes at full speed in topic "bulk", and a load of
# `--rate` msgs/s of 1 KiB on topic "bench" (spread over both groups).
# Round after round, the same load runs once without a move and once while
# the bulk queue moves to the other group (its copy paced by the brokers'
# --move-bytes-per-sec); the table gives each pair's e2e p50/p99 and their
# ratios, the move's time and its frozen window. The nodes and the load
# generator share two CPUs: read ratios, not absolute figures.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--rounds N] [--rate R] [--duration SECS] [--fill-secs S] [--move-bytes-per-sec B] [--out DIR]
  --rounds N             pairs of runs, without and with a move (default: 2)
  --rate R               msgs/s of the measured load (default: 5000)
  --duration SECS        measured seconds per run (default: 10; 2 s warm-up)
  --fill-secs S          seconds of full-speed writes into the moving queue (default: 4)
  --move-bytes-per-sec B the copy's bound on the brokers (default: their 64 MiB/s)
  --out DIR              keep summaries and logs here (default: a temp dir)
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=2 rate=5000 duration=10 fill=4 pace="" out="" bin=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --fill-secs) fill=$2; shift 2 ;;
    --move-bytes-per-sec) pace=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
# shellcheck source=lib/processes.sh
source "$here/lib/processes.sh"
cluster_run_setup
trap stop_all EXIT

start_etcd "$out/etcd" "$out/etcd.log"
addrs=() admins=()
for i in 1 2; do
  listen="127.0.0.$((80 + i)):$(free_port)" admin="127.0.0.$((80 + i)):$(free_port)"
  start_serve "$out/g$i" "$listen" --cores $((i - 1)) --segment-mib 64 --cache-mib 64 --admin-listen "$admin" \
    --cluster "$etcd_url" --broker-group "g$i" --node "n$i" --insync-min 1 ${pace:+--move-bytes-per-sec "$pace"}
  addrs+=("$listen") admins+=("$admin")
done
brokers=$(IFS=,; echo "${addrs[*]}")
sleep 2 # both groups lead and recorded their shards before topics are placed

echo "filling topic bulk: ${fill}s at full speed into one queue" >&2
"$bin/ringmq-bench" run --broker "$brokers" --topic bulk --queues 1 --rate 0 --max-outstanding 256 \
  --warmup 0s --duration "${fill}s" --out "$out/fill" >"$out/fill.log" 2>&1

# The group whose node serves the bulk queue now (node i listens on 127.0.0.8i).
there() {
  local addr
  addr=$("$bin/ringmq" topic describe bulk --broker "${addrs[0]}" | awk '$1 == "0" { print $3 }')
  [[ $addr == 127.0.0.81:* ]] && echo g1 || echo g2
}
frozen_ms() { # the target's last frozen window, over both nodes' shards
  for a in "${admins[@]}"; do curl -s "http://$a/metrics"; done |
    awk '/^ringmq_queue_move_last_frozen_seconds/ { if ($NF > m) m = $NF } END { printf "%.1f", m * 1000 }'
}

bench() { # run name
  "$bin/ringmq-bench" run --broker "$brokers" --topic bench --queues 4 --rate "$rate" --warmup 2s \
    --duration "${duration}s" --out "$out/$1" >"$out/$1.log" 2>&1
}

for r in $(seq "$rounds"); do
  echo "round $r: without a move" >&2
  bench "still-$r"
  from=$(there)
  to=$([[ $from == g1 ]] && echo g2 || echo g1)
  echo "round $r: while the bulk queue moves $from -> $to" >&2
  started=$(date +%s.%N)
  "$bin/ringmq" cluster move --cluster "$etcd_url" --topic bulk --queue 0 --to "$to" >"$out/move-$r.log" 2>&1 &
  mover=$!
  sleep 1 # the copy under way when the measured load begins
  bench "moving-$r"
  wait "$mover" || echo "the move of round $r failed (see $out/move-$r.log)" >&2
  ended=$(date +%s.%N)
  echo "$r $(python3 -c "print($ended - $started)") $(frozen_ms)" >>"$out/moves.txt"
done
stop_all
rm -rf "$out"/g?/data "$out/etcd" # gigabytes; summaries and logs stay

OUT="$out" ROUNDS="$rounds" FILL="$fill" python3 - <<'PY'
import json, os
out = os.environ["OUT"]
moves = {l.split()[0]: l.split()[1:] for l in open(os.path.join(out, "moves.txt"))}
fill = json.load(open(os.path.join(out, "fill", "summary.json")))
print(f"moving queue: {fill['mb_per_s'] * float(os.environ['FILL']):.0f} MB written into it before the rounds")
print(f"{'round':>5} {'p50 still':>9} {'p50 moving':>10} {'ratio':>6} {'p99 still':>9} {'p99 moving':>10} {'ratio':>6} "
      f"{'move s':>7} {'frozen ms':>9}")
for r in range(1, int(os.environ["ROUNDS"]) + 1):
    try:
        a = json.load(open(os.path.join(out, f"still-{r}", "summary.json")))["e2e"]
        b = json.load(open(os.path.join(out, f"moving-{r}", "summary.json")))["e2e"]
    except OSError:
        print(f"{r:>5} (no result)")
        continue
    secs, frozen = moves.get(str(r), ["?", "?"])
    print(f"{r:>5} {a['p50_us'] / 1e3:>9.2f} {b['p50_us'] / 1e3:>10.2f} {b['p50_us'] / a['p50_us']:>6.2f} "
          f"{a['p99_us'] / 1e3:>9.2f} {b['p99_us'] / 1e3:>10.2f} {b['p99_us'] / a['p99_us']:>6.2f} "
          f"{float(secs):>7.1f} {frozen:>9}")
print(f"runs in {out}")
PY
