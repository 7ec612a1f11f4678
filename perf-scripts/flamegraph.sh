#!/usr/bin/env bash
# Records the broker's shard threads with perf while ringmq-bench drives it,
# and renders a flame graph SVG (inferno, from crates.io, if not installed).
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--out FILE.svg] [--seconds N] [--rate MSGS] [--broker-cores LIST] [--client-cores LIST]
  --out FILE           flame graph to write (default: flamegraph.svg)
  --seconds N          seconds to record (default: 15)
  --rate MSGS          load generator rate in msgs/s (default: 20000)
  --broker-cores LIST  CPUs for the broker (default: the last CPU)
  --client-cores LIST  CPUs for the load generator (default: CPU 0)
Needs perf (Debian: linux-perf) and permission to use it (root, or kernel.perf_event_paranoid <= 1).
USAGE
}

out=flamegraph.svg seconds=15 rate=20000 bcores=$(( $(nproc) - 1 )) ccores=0
# shellcheck source=lib/broker-under-load.sh
source "$(dirname "$0")/lib/broker-under-load.sh"
while [[ $# -gt 0 ]]; do
  load_flag "$@" && { shift 2; continue; }
  case "$1" in
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

# shellcheck source=lib/tools.sh
source "$(dirname "$0")/lib/tools.sh"
need_perf
if ! command -v inferno-flamegraph >/dev/null; then
  echo "inferno not found; installing it with cargo (crates.io)" >&2
  cargo install --quiet inferno
fi

start_broker_under_load flamegraph "$bcores" "$ccores" "$rate" "$seconds"
echo "recording $seconds s of the broker (pid $broker_pid) at $rate msgs/s" >&2
perf record -F 999 -g --call-graph dwarf,16384 -p "$broker_pid" -o "$work/perf.data" -- sleep "$seconds" 2>"$work/perf.err"
wait "$bench_pid" || true
perf script -i "$work/perf.data" 2>/dev/null | inferno-collapse-perf | inferno-flamegraph --title "ringmq broker at $rate msgs/s" >"$out"
echo "wrote $out ($(du -h "$out" | cut -f1))"
tail -4 "$work/bench.out"
