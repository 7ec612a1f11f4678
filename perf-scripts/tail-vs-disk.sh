#!/usr/bin/env bash
# The far tail against the disk's own: how much of ringmq's e2e p99.9 at a
# fixed rate the disk alone imposes on any group-committing log.
#
#  1. fio writes --bs bytes at a time, back to back, through an O_DIRECT |
#     O_DSYNC descriptor (the engine's durable write: one I/O per round) on
#     the broker's CPU, logging every write's latency.
#  2. For each rate, the disk's floor: messages arrive evenly at that rate; a
#     durable write starts as soon as the previous one ends and there is a
#     message waiting, takes every message that arrived before it, and lasts
#     the next latency of fio's log, in order (so the disk's slow stretches
#     stay together). A message is durable when its write ends. The floor's
#     percentiles are what a perfect broker on this disk would show.
#  3. ringmq-bench at each rate (embedded broker; 1 queue, 2 producers, 1
#     consumer, 1 KiB, as bench/workloads/1-topic-1-queue-1kb-*.toml) and its
#     e2e and publish percentiles beside the floor's.
#
#   perf-scripts/tail-vs-disk.sh [--rates 10000,50000] [--duration SECS] [--bs BYTES] [--out DIR]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rates=10000,50000 duration=30 bs=8192 out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rates) rates=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --bs) bs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; sed -n '19p' "$0" >&2; exit 2 ;;
  esac
done
[[ -n $out ]] || out=$(mktemp -d)
mkdir -p "$out"
# shellcheck source=lib/tools.sh
source "$here/lib/tools.sh"
need_fio

(cd "$root" && cargo build --release -q -p ringmq-bench)
cpu=$(( $(nproc) - 1 ))
echo "fio: ${bs} B O_DSYNC writes back to back on CPU $cpu for ${duration}s" >&2
trap 'rm -f "$out/fio.test"' EXIT
taskset -c "$cpu" fio --name=dsync --filename="$out/fio.test" --size=1G --bs="$bs" --rw=write --direct=1 \
  --sync=dsync --ioengine=psync --iodepth=1 --runtime="$duration" --time_based --loops=1000 \
  --write_lat_log="$out/fio" --log_avg_msec=0 --output-format=json >"$out/fio.json"
rm -f "$out/fio.test" "$out/fio_clat.1.log" "$out/fio_slat.1.log"

IFS=',' read -ra list <<<"$rates"
for r in "${list[@]}"; do
  echo "bench: $r msgs/s on one queue for ${duration}s" >&2
  "$root/target/release/ringmq-bench" run --embedded --queues 1 --producers 2 --consumers 1 \
    --message-size 1024 --rate "$r" --warmup 5s --duration "${duration}s" --out "$out/rate-$r" \
    >"$out/rate-$r.log" 2>&1 || { echo "the run at $r msgs/s failed:" >&2; tail -5 "$out/rate-$r.log" >&2; }
done

OUT="$out" RATES="$rates" python3 - <<'PY'
import json, os
out = os.environ["OUT"]
service = [int(line.split(",")[1]) for line in open(f"{out}/fio_lat.1.log")]
def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))]

def floor(rate):
    """Latencies (ns) of messages arriving evenly at `rate` on a log whose
    writes take fio's latencies in order, each starting once the previous
    ended and a message waits, and taking every message that arrived."""
    gap = 1e9 / rate
    lat, free, i = [], 0.0, 0
    for d in service:
        start = max(free, i * gap)
        end = start + d
        last = int(start // gap)  # messages 0..last arrived by the start
        lat.extend(end - k * gap for k in range(i, last + 1))
        i, free = last + 1, end
    lat.sort()
    return lat

s = sorted(service)
print(f"disk: {len(service)} O_DSYNC writes, p50 {pct(s, .5)/1e3:.0f} us, p99 {pct(s, .99)/1e3:.0f} us, "
      f"p99.9 {pct(s, .999)/1e3:.0f} us, p99.99 {pct(s, .9999)/1e3:.0f} us, max {s[-1]/1e3:.0f} us")
print(f"{'rate':>7} {'':>14} {'p50':>7} {'p99':>7} {'p99.9':>7} {'p99.99':>7} {'max':>7} {'p99.9/p99':>10}  (ms)")
for r in (int(x) for x in os.environ["RATES"].split(",")):
    f = floor(r)
    ms = lambda v: v / 1e6
    rows = [("disk floor", [ms(pct(f, q)) for q in (.5, .99, .999, .9999)] + [ms(f[-1])])]
    try:
        run = json.load(open(f"{out}/rate-{r}/summary.json"))
        for kind in ("publish", "e2e"):
            p = run[kind]
            rows.append((f"ringmq {kind}", [p[k] / 1e3 for k in ("p50_us", "p99_us", "p999_us", "p9999_us", "max_us")]))
    except FileNotFoundError:
        pass
    for name, v in rows:
        print(f"{r:>7} {name:>14} {v[0]:>7.2f} {v[1]:>7.2f} {v[2]:>7.2f} {v[3]:>7.2f} {v[4]:>7.2f} {v[2] / v[1]:>10.2f}")
    if len(rows) == 3:
        e2e = rows[2][1]
        print(f"{r:>7} ratios: e2e p99 / floor p99 {e2e[1] / rows[0][1][1]:.2f}, e2e p99.9 / floor p99.9 {e2e[2] / rows[0][1][2]:.2f}")
print(f"runs kept in {out}")
PY
