#!/usr/bin/env bash
# Runs the load generator at the given rates (embedded broker) and fio's
# 64 KiB write + fdatasync on the same disk, in one go, and prints each run's
# end-to-end p99 as a multiple of fio's write+fdatasync p99. For each rate fio
# also does that rate's disk work alone (the appends' bytes as 64 KiB
# write+fdatasync pairs, paced, beside the zero-fill of new segments at the
# same rate): what the disk itself gives a durable write under that load.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--rates LIST] [--duration SECS] [--out DIR]
  --rates LIST     comma-separated msgs/s (default: 10000,150000,300000)
  --duration SECS  measured seconds per run (default: 10; 3 s warm-up each)
  --out DIR        keep the runs' .hgrm and summary.json here (default: a temp dir)
Then compare runs with: cargo run --release -p ringmq-bench -- compare DIR/rate-*
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rates=10000,150000,300000 duration=10 out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rates) rates=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -n $out ]] || out=$(mktemp -d)
mkdir -p "$out"

(cd "$root" && cargo build --release -q -p ringmq-bench)
cpu=$(( $(nproc) - 1 ))
echo "fio: 64 KiB write + fdatasync on CPU $cpu" >&2
disk=$("$here/disk-baseline.sh" --bs 65536 --runtime 5 --cpu "$cpu" --dir "$out/fio" --json)
IFS=',' read -ra list <<<"$rates"
for r in "${list[@]}"; do
  echo "bench: $r msgs/s for ${duration}s" >&2
  "$root/target/release/ringmq-bench" run --embedded --rate "$r" --duration "${duration}s" --warmup 3s --out "$out/rate-$r" >"$out/rate-$r.log" 2>&1 || echo "run at $r msgs/s failed (see $out/rate-$r.log)" >&2
  # The run's log bytes: each message's value plus a 34-byte record header.
  mbps=$(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))
print(max(1, round(s["msgs_per_s"] * (s["message_size"] + 34) / 1e6)))' "$out/rate-$r/summary.json" 2>/dev/null) || continue
  echo "fio: that rate's disk work, $mbps MB/s of write+fdatasync beside a $mbps MB/s fill" >&2
  "$here/disk-baseline.sh" --bs 65536 --runtime 5 --cpu "$cpu" --dir "$out/fio" --rate-mbps "$mbps" --fill-mbps "$mbps" --json >"$out/rate-$r.fio.json"
done

DISK="$disk" OUT="$out" RATES="$rates" python3 - <<'PY'
import json, os
disk = json.loads(os.environ["DISK"])
fio = disk["write_plus_sync_p99_us"]
print(f"fio 64 KiB write+fdatasync: write p99 {disk['write_p99_us']} us, sync p99 {disk['sync_p99_us']} us, sum {fio} us")
# fio's percentiles count operations: a 300 ms stall is one slow sync among
# thousands. The load generator's count messages sent on a schedule: every
# message sent during a stall waits for it. The stalls show in sync max.
print(f"fio sync p99.9 {disk['sync_p999_us']} us, p99.99 {disk['sync_p9999_us']} us, max {disk['sync_max_us'] / 1000:.1f} ms")
# send p99: the load generator's own lag (send delay), part of every e2e latency.
# disk p99: fio's write+fdatasync p99 doing that rate's disk work alone (paced
# appends plus the zero-fill), and the e2e p99 as a multiple of it.
print(f"{'rate':>8} {'msgs/s':>9} {'lost':>5} {'e2e p50':>9} {'p90':>9} {'p99':>9} {'p99.9':>9} {'max':>9}  p99/fio  send p99  disk p99  p99/disk")
for r in os.environ["RATES"].split(","):
    try:
        s = json.load(open(os.path.join(os.environ["OUT"], f"rate-{r}", "summary.json")))
    except OSError:
        print(f"{r:>8} (no summary)")
        continue
    e = s["e2e"]
    ms = lambda us: f"{us / 1000:.2f}"
    at_load = json.load(open(os.path.join(os.environ["OUT"], f"rate-{r}.fio.json")))["write_plus_sync_p99_us"]
    print(f"{r:>8} {s['msgs_per_s']:>9.0f} {s['lost']:>5} {ms(e['p50_us']):>9} {ms(e['p90_us']):>9} {ms(e['p99_us']):>9} "
          f"{ms(e['p999_us']):>9} {ms(e['max_us']):>9}  {e['p99_us'] / fio:6.1f}x {ms(s['send_delay']['p99_us']):>9} "
          f"{ms(at_load):>9} {e['p99_us'] / at_load:8.1f}x")
PY
echo "runs kept in $out" >&2
