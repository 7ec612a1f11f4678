#!/usr/bin/env bash
# Ordinary produce/fetch latency with and without a backlog of pending
# delayed messages on the broker, in one go: two embedded-broker runs of the
# load generator (the second first stores N delayed messages, due in an hour,
# on one queue, so one shard holds them all), both probing delayed-delivery
# precision, and the ratios of their end-to-end percentiles.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--pending N] [--rate R] [--duration SECS] [--out DIR]
  --pending N      delayed messages pending in the second run (default: 1000000)
  --rate R         ordinary messages/s in both runs (default: 10000)
  --duration SECS  measured seconds per run (default: 20; 3 s warm-up each)
  --out DIR        keep both runs' .hgrm and summary.json here (default: a temp dir)
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
pending=1000000 rate=10000 duration=20 out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pending) pending=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
command -v python3 >/dev/null || { echo "python3 is needed to print the comparison" >&2; exit 1; }
[[ -n $out ]] || out=$(mktemp -d)
mkdir -p "$out"

(cd "$root" && cargo build --release -q -p ringmq-bench)
bench="$root/target/release/ringmq-bench"
for n in 0 "$pending"; do
  echo "bench: $rate msgs/s for ${duration}s with $n delayed messages pending" >&2
  "$bench" run --embedded --rate "$rate" --duration "${duration}s" --warmup 3s \
    --delayed-pending "$n" --delayed-probe-rate 50 --out "$out/pending-$n" >"$out/pending-$n.log" 2>&1 \
    || { echo "run with $n pending failed (see $out/pending-$n.log)" >&2; exit 1; }
done

OUT="$out" PENDING="$pending" python3 - <<'PY'
import json, os
out, pending = os.environ["OUT"], os.environ["PENDING"]
runs = [json.load(open(os.path.join(out, f"pending-{n}", "summary.json"))) for n in ("0", pending)]
keys = ["p50_us", "p90_us", "p99_us", "p999_us", "max_us"]
print(f"{'':>22} " + " ".join(f"{k[:-3]:>9}" for k in keys) + "   (ms)")
for name, s in zip(("e2e, none pending", f"e2e, {pending} pending"), runs):
    print(f"{name:>22} " + " ".join(f"{s['e2e'][k] / 1000:9.3f}" for k in keys))
print(f"{'ratio':>22} " + " ".join(f"{runs[1]['e2e'][k] / max(runs[0]['e2e'][k], 1):9.2f}" for k in keys))
for name, s in zip(("late, none pending", f"late, {pending} pending"), runs):
    d = s["delayed"]["lateness"]
    print(f"{name:>22} " + " ".join(f"{d[k] / 1000:9.3f}" for k in keys) + f"   ({d['count']} probes)")
print("lost:", [s["lost"] for s in runs])
PY
echo "runs kept in $out" >&2
