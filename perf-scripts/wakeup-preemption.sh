#!/usr/bin/env bash
# Checks whether a thread woken on a busy core runs at once or waits for the
# running thread to sleep, yield or reach the next tick. The broker's
# completion yield (ShardConfig::completion_yield, serve --completion-yield-us)
# exists for the second kind of kernel: there the kernel work that completes
# an O_DSYNC write on the shard's core waits for the busy shard.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--dir DIR] [--cpu N] [--runtime SECS]
  --dir DIR       directory on the data disk (default: ./wakeup-check-data, removed after)
  --cpu N         the broker core to test (default: the last CPU)
  --runtime SECS  seconds per fio run (default: 3)

Runs fio's 4 KiB O_DSYNC writes (io_uring, Direct I/O, one at a time, 100 us
apart) on CPU N three times: alone, beside a busy loop on CPU N, and beside a
busy loop that yields the CPU every 50 us. Prints each run's median write
latency and what it means for completion_yield. Needs fio (installed from
Debian's packages if missing) and python3.
USAGE
}

dir=./wakeup-check-data cpu=$(( $(nproc) - 1 )) runtime=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --runtime) runtime=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
command -v python3 >/dev/null || { echo "python3 not found" >&2; exit 1; }
# shellcheck source=lib/tools.sh
source "$(dirname "$0")/lib/tools.sh"
need_fio

mkdir -p "$dir"
loop_pid=""
cleanup() {
  [[ -n $loop_pid ]] && kill "$loop_pid" 2>/dev/null || true
  rm -f "$dir/wakeup-check.test"
  rmdir "$dir" 2>/dev/null || true
}
trap cleanup EXIT

# Median O_DSYNC write latency in microseconds.
fio_p50() {
  taskset -c "$cpu" fio --output-format=json --name=dsync --filename="$dir/wakeup-check.test" --size=64M \
    --bs=4k --rw=write --direct=1 --sync=dsync --ioengine=io_uring --iodepth=1 --thinktime=100 \
    --runtime="$runtime" --time_based | python3 -c \
    'import json, sys; print(round(json.load(sys.stdin)["jobs"][0]["write"]["clat_ns"]["percentile"]["50.000000"] / 1000))'
}

# A busy loop on the CPU; with an argument, it yields every that many microseconds.
busy_loop() {
  taskset -c "$cpu" python3 -c '
import os, sys, time
every = float(sys.argv[1]) / 1e6 if len(sys.argv) > 1 else None
while True:
    start = time.perf_counter()
    while every is None or time.perf_counter() - start < every:
        pass
    os.sched_yield()
' "$@" &
  loop_pid=$!
  sleep 0.2
}

alone=$(fio_p50)
busy_loop
busy=$(fio_p50)
kill "$loop_pid"; loop_pid=""
busy_loop 50
yielding=$(fio_p50)
kill "$loop_pid"; loop_pid=""

echo "4 KiB O_DSYNC write p50 on CPU $cpu: alone ${alone} us, beside a busy loop ${busy} us, beside a loop yielding every 50 us ${yielding} us"
if (( busy > 4 * alone + 200 )); then
  echo "woken threads wait for the running one here: keep completion_yield on (the default, 20 us)"
else
  echo "woken threads preempt the running one here: completion_yield can be 0 (serve --completion-yield-us 0)"
fi
