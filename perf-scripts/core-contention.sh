#!/usr/bin/env bash
# Shows what else runs on the broker's core while ringmq-bench drives it:
# records scheduler events of that CPU with perf and prints, per task, its
# time on the core and its longest single run, and the shard thread's
# longest waits for the core (runnable, not running) with who ran meanwhile.
# A kernel thread or a client thread near the top is what tune-host.sh and
# --client-cores are for (this found kdamond.0 taking 4 ms slices).
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--seconds N] [--rate MSGS] [--broker-cores LIST] [--client-cores LIST]
  --seconds N          seconds to record (default: 8)
  --rate MSGS          load generator rate in msgs/s (default: 150000)
  --broker-cores LIST  CPUs for the broker; the first one is recorded (default: the last CPU)
  --client-cores LIST  CPUs for the load generator (default: CPU 0)
Needs perf (Debian: linux-perf) and root (scheduler tracepoints).
USAGE
}

seconds=8 rate=150000 bcores=$(( $(nproc) - 1 )) ccores=0
# shellcheck source=lib/broker-under-load.sh
source "$(dirname "$0")/lib/broker-under-load.sh"
while [[ $# -gt 0 ]]; do
  load_flag "$@" && { shift 2; continue; }
  case "$1" in
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

# shellcheck source=lib/tools.sh
source "$(dirname "$0")/lib/tools.sh"
need_perf
if [[ $EUID != 0 ]]; then
  echo "perf sched record needs root (scheduler tracepoints)" >&2
  exit 1
fi

start_broker_under_load core-contention "$bcores" "$ccores" "$rate" "$seconds"
cpu=${bcores%%[,-]*}
echo "recording $seconds s of CPU $cpu (broker pid $broker_pid) at $rate msgs/s" >&2
perf sched record -C "$cpu" -o "$work/sched.data" -- sleep "$seconds" >/dev/null 2>"$work/perf.err"
wait "$bench_pid" || echo "the bench run failed (see below)" >&2
perf sched timehist -i "$work/sched.data" 2>/dev/null >"$work/timehist.txt"
grep -E '^ +e2e ' "$work/bench.out" | sed 's/^/bench: /' || tail -5 "$work/bench.out"

CPU="$cpu" SECONDS_RECORDED="$seconds" python3 - "$work/timehist.txt" <<'PY'
import collections, os, sys
cpu = f"[{int(os.environ['CPU']):04d}]"
runs, total, longest = collections.Counter(), collections.Counter(), collections.Counter()
waits, last_other = [], None
for line in open(sys.argv[1]):
    f = line.split()
    # time, cpu, task name [tid/pid], wait time, sch delay, run time (ms)
    if len(f) < 6 or f[1] != cpu or "[" not in f[2]:
        continue
    task = f[2].split("[")[0] or "?"
    try:
        delay, run = float(f[-2]), float(f[-1])
    except ValueError:
        continue
    runs[task] += 1
    total[task] += run
    longest[task] = max(longest[task], run)
    if task.startswith("ringmq-shard"):
        waits.append((delay, float(f[0]), last_other))
    elif task != "<idle>":
        last_other = (task, run)
secs = float(os.environ["SECONDS_RECORDED"])
print(f"CPU {int(os.environ['CPU'])}, {secs:.0f} s: time on the core per task")
print(f"{'task':<24} {'ms':>9} {'share':>6} {'runs':>8} {'longest ms':>11}")
for task, ms in total.most_common(12):
    print(f"{task:<24} {ms:9.1f} {ms / (secs * 10):5.1f}% {runs[task]:8d} {longest[task]:11.3f}")
print("\nthe shard thread's longest waits for the core (runnable, not running)")
for delay, at, other in sorted(waits, reverse=True)[:8]:
    who = f"last other task: {other[0]} ({other[1]:.3f} ms run)" if other else ""
    print(f"  {delay:7.3f} ms at {at:.6f}  {who}")
PY
