# Sourced by the perf scripts that record a broker under load.
#
# load_flag FLAG VALUE
# Sets seconds, rate, bcores or ccores from one of the load's flags
# (--seconds, --rate, --broker-cores, --client-cores); false for any other
# flag, which the script parses itself.
load_flag() {
  case "$1" in
    --seconds) seconds=$2 ;;
    --rate) rate=$2 ;;
    --broker-cores) bcores=$2 ;;
    --client-cores) ccores=$2 ;;
    *) return 1 ;;
  esac
}

# start_broker_under_load NAME BROKER_CORES CLIENT_CORES RATE SECONDS
# Builds ringmq and ringmq-bench, starts `ringmq serve` on BROKER_CORES in a
# new work directory under target/NAME.*, and ringmq-bench against it at RATE
# msgs/s for SECONDS plus margins on CLIENT_CORES; returns once the load is
# warm. Sets root, work, broker_pid and bench_pid; on exit the broker is
# stopped and the work directory removed.
start_broker_under_load() {
  local name=$1 bcores=$2 ccores=$3 rate=$4 seconds=$5 addr
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  (cd "$root" && cargo build --release -q -p ringmq -p ringmq-bench)
  work=$(mktemp -d "$root/target/$name.XXXXXX")
  trap 'kill "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

  "$root/target/release/ringmq" serve --data-dir "$work/data" --listen 127.0.0.1:0 --cores "$bcores" \
    --segment-mib 256 --cache-mib 128 >"$work/serve.out" 2>"$work/serve.err" &
  broker_pid=$!
  for _ in $(seq 100); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/^ringmq listening on \([^ ]*\).*/\1/p' "$work/serve.out")
  [[ -n $addr ]] || { echo "the broker did not start:" >&2; cat "$work/serve.err" >&2; exit 1; }

  "$root/target/release/ringmq-bench" run --broker "$addr" --client-cores "$ccores" --rate "$rate" \
    --warmup 2s --duration "$((seconds + 4))s" >"$work/bench.out" 2>&1 &
  bench_pid=$!
  sleep 3
}
