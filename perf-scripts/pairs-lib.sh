# Shared by the scripts that run a broker in two modes, alternating
# (kafka-vs-native.sh, tls-vs-plain.sh): their arguments, starting and
# stopping the broker, its CPU ticks, and the summary of the pairs. Source
# it, then `parse_pair_args WHAT "$@"` (WHAT names a pair, e.g. clear/TLS).

# parse_pair_args WHAT ARGS...: sets rounds, duration, rate, load and out (a temp dir unless given).
parse_pair_args() {
  local what=$1; shift
  rounds=3 duration=10 rate=10000 load=100000 out=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --rounds) rounds=$2; shift 2 ;;
      --duration) duration=$2; shift 2 ;;
      --rate) rate=$2; shift 2 ;;
      --load) load=$2; shift 2 ;;
      --out) out=$2; shift 2 ;;
      -h|--help) pair_usage "$what"; exit 0 ;;
      *) echo "unknown argument: $1" >&2; pair_usage "$what" >&2; exit 2 ;;
    esac
  done
  [[ -n $out ]] || out=$(mktemp -d)
  mkdir -p "$out"
}

pair_usage() {
  cat <<USAGE
usage: $0 [--rounds N] [--duration SECS] [--rate N] [--load N] [--out DIR]
  --rounds N       $1 pairs per workload (default: 3)
  --duration SECS  measured seconds per run (default: 10; 2 s warm-up each)
  --rate N         msgs/s of the latency workload (default: 10000)
  --load N         msgs/s of the cost workload, one both sides keep up with: the
                   broker's busy us/msg at equal load (default: 100000; 0: skipped)
  --out DIR        keep every run's summary.json and logs here (default: a temp dir)
USAGE
}

# The workloads, in order: as fast as possible, the latency rate, the cost load.
workloads() { echo max rate; [[ $load -gt 0 ]] && echo load; true; }
# offered WORKLOAD: its msgs/s (0: as fast as possible).
offered() { case $1 in max) echo 0 ;; rate) echo "$rate" ;; load) echo "$load" ;; esac; }

broker=""
stop_broker() {
  [[ -n $broker ]] && { kill "$broker" 2>/dev/null || true; wait "$broker" 2>/dev/null || true; }
  broker=""
}
trap stop_broker EXIT

# shellcheck source=lib/processes.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/processes.sh" # free_port, shard_busy_seconds, shard_busy_since
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# start_broker DIR ARGS...: ringmq serve in the background, its admin
# listener on $admin; waits until it listens.
start_broker() {
  local dir=$1; shift
  admin=127.0.0.1:$(free_port)
  "$bin/ringmq" serve --data-dir "$dir/data" --admin-listen "$admin" "$@" >"$dir/serve.out" 2>"$dir/serve.err" &
  broker=$!
  for _ in $(seq 200); do grep -q listening "$dir/serve.out" 2>/dev/null && break; sleep 0.1; done
}

# bench_run NAME ARGS...: one load-generator run against the running broker,
# and the broker's CPU ticks and shards' busy seconds over it; then the
# broker is stopped.
bench_run() {
  local name=$1; shift
  local dir=$out/$name before after busy_before
  before=$(cpu_ticks "$broker") busy_before=$(shard_busy_seconds "$admin")
  "$bin/ringmq-bench" run --client-cores 1 --warmup 2s --duration "${duration}s" --out "$dir" "$@" \
    >"$dir/bench.log" 2>&1 || echo "the $name run failed (see $dir/bench.log)" >&2
  after=$(cpu_ticks "$broker")
  echo $((after - before)) >"$dir/broker-ticks"
  shard_busy_since "$admin" "$busy_before" >"$dir/broker-busy"
  stop_broker
  rm -rf "$dir/data"
}

# summarize BASE OTHER: each run's numbers, then OTHER / BASE per workload (medians of the rounds).
summarize() {
  OUT="$out" ROUNDS="$rounds" TICK="$(getconf CLK_TCK)" BASE="$1" OTHER="$2" WORKLOADS="$(workloads | xargs)" python3 - <<'PY'
import json, os, statistics
out, rounds, tick = os.environ["OUT"], int(os.environ["ROUNDS"]), int(os.environ["TICK"])
base, other = os.environ["BASE"], os.environ["OTHER"]
def load(name):
    try:
        s = json.load(open(os.path.join(out, name, "summary.json")))
        s["broker_cpu_us_per_msg"] = int(open(os.path.join(out, name, "broker-ticks")).read()) / tick * 1e6 / max(1, s["received"])
        s["busy_us_per_msg"] = float(open(os.path.join(out, name, "broker-busy")).read()) * 1e6 / max(1, s["received"])
        # The load generator's CPU per message: its producers, consumers and the client library's threads.
        s["client_us_per_msg"] = sum(s["cpu_us_per_msg"].get(k, 0) for k in ("producers", "consumers", "client_library"))
        return s
    except (OSError, ValueError):
        return None
# busy: the broker's shards at work; cpu: its CPU time, which also counts their idle spin;
# client: the load generator's threads (producers, consumers, client library) per message sent.
print(f"{'run':<14} {'msgs/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'busy us/msg':>12} {'cpu us/msg':>11} {'client us/msg':>14} {'lost':>5}")
ratios = {}
for workload in os.environ["WORKLOADS"].split():
    for r in range(1, rounds + 1):
        pair = {m: load(f"{workload}-{m}-{r}") for m in [base, other]}
        for m, s in pair.items():
            if s is None:
                print(f"{workload}-{m}-{r:<5} (no result)")
                continue
            e = s["e2e"]
            print(f"{workload + '-' + m + '-' + str(r):<14} {s['msgs_per_s']:>9.0f} {e['p50_us'] / 1e3:>8.3f} {e['p99_us'] / 1e3:>8.3f} {s['busy_us_per_msg']:>12.2f} {s['broker_cpu_us_per_msg']:>11.2f} {s['client_us_per_msg']:>14.2f} {s['lost']:>5}")
        b, o = pair[base], pair[other]
        if b and o:
            for key, value in [("msgs/s", o["msgs_per_s"] / b["msgs_per_s"]),
                               ("p50", o["e2e"]["p50_us"] / max(1, b["e2e"]["p50_us"])),
                               ("p99", o["e2e"]["p99_us"] / max(1, b["e2e"]["p99_us"])),
                               ("busy us/msg", o["busy_us_per_msg"] / max(1e-9, b["busy_us_per_msg"])),
                               ("cpu us/msg", o["broker_cpu_us_per_msg"] / b["broker_cpu_us_per_msg"]),
                               ("client us/msg", o["client_us_per_msg"] / max(1e-9, b["client_us_per_msg"]))]:
                ratios.setdefault((workload, key), []).append(value)
print(f"{other} / {base}, median of the rounds:")
for (workload, key), values in ratios.items():
    print(f"  {workload:<5} {key:<14} {statistics.median(values):.2f}   ({', '.join(f'{v:.2f}' for v in values)})")
print(f"runs in {out}")
PY
}
