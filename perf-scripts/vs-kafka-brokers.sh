#!/usr/bin/env bash
# One workload against every broker this machine has: ringmq over its native
# protocol, ringmq's Kafka listener, and each other Kafka-compatible broker
# found (tansu if `tansu` is installed, Apache Kafka if KAFKA_HOME is set,
# Redpanda if `rpk` is on PATH); says which it skipped and why. Each run
# starts its broker fresh on CPU 0 and drives it from CPU 1 with the bundled
# load generator: 1 KiB messages, 2 producers, 1 consumer, durable acks
# (native async sends; Kafka acks=all), at 10,000 and 50,000 msgs/s and as
# fast as possible with 256 unacknowledged messages per producer. Prints one
# table: each run's msgs/s, e2e p50/p99/p99.9, the broker's CPU per message,
# and its ratios to ringmq native; and one chart per workload
# (ringmq-bench compare), all on the same axes.
#
# Durability differs by broker and is named in every label: ringmq
# acknowledges after fdatasync; Kafka's default flush leaves acknowledged
# data in the page cache; tansu here keeps it in memory; Redpanda fsyncs
# (not in dev mode, which this script does not use).
# Every Kafka-protocol run uses the same librdkafka: the confluent-kafka
# wheel's where it is installed (tansu needs one newer than Debian's 2.0.2),
# else the system's.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=1 duration=10 out="" only=""
usage() {
  cat <<USAGE
usage: $0 [--rounds N] [--duration SECS] [--out DIR] [--only NAME,...]
  --rounds N       runs per broker and workload, the brokers alternating (default: 1; medians)
  --duration SECS  measured seconds per run (default: 10; 2 s warm-up each)
  --out DIR        keep every run's summary.json, logs and the charts here (default: a temp dir)
  --only NAMES     just these of: native, ringmq-kafka, tansu, kafka, redpanda
USAGE
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
pkg-config --exists rdkafka || { echo "needs librdkafka (Debian: librdkafka-dev)" >&2; exit 1; }
# shellcheck source=lib/processes.sh
source "$here/lib/processes.sh" # free_port, pids, stop_all
trap stop_all EXIT
[[ -n $out ]] || out=$(mktemp -d)
mkdir -p "$out"
(cd "$root" && cargo build --release -q -p ringmq && cargo build --release -q -p ringmq-bench --features kafka)
bin=$root/target/release

wanted() { [[ -z $only || ",$only," == *",$1,"* ]]; }

# The wheel's librdkafka, linked as librdkafka.so.1 into $out/librdkafka (empty: none).
rdkafka_dir=""
# Debian's Python, where tests/run.sh installs the wheel.
wheel_lib=$(/usr/bin/python3 -c 'import confluent_kafka, glob, os
d = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
print(next(iter(sorted(glob.glob(os.path.join(d, "librdkafka-*.so*")))), ""))' 2>/dev/null || true)
if [[ -n $wheel_lib ]]; then
  rdkafka_dir=$out/librdkafka
  mkdir -p "$rdkafka_dir"
  ln -sf "$wheel_lib" "$rdkafka_dir/librdkafka.so.1"
fi

# The brokers to run, each "name|label|durability", and what was skipped.
brokers=() skipped=()
wanted native && brokers+=("native|ringmq native|fdatasync, then ack")
wanted ringmq-kafka && brokers+=("ringmq-kafka|ringmq Kafka listener|acks=all, fdatasync, then ack")
tansu=$(command -v tansu || true)
[[ -z $tansu && -x $HOME/.cargo/bin/tansu ]] && tansu=$HOME/.cargo/bin/tansu
if wanted tansu; then
  if [[ -z $tansu ]]; then
    skipped+=("tansu: not installed (cargo install tansu --locked --features dynostore)")
  elif [[ -z $rdkafka_dir ]]; then
    skipped+=("tansu: librdkafka 2.0.2 cannot read its ApiVersions answer; pip install confluent-kafka for a newer one")
  else
    brokers+=("tansu|tansu $("$tansu" --version 2>/dev/null | awk '{print $NF}')|acks=all, in memory")
  fi
fi
if wanted kafka; then
  if [[ -n ${KAFKA_HOME:-} && -x ${KAFKA_HOME:-}/bin/kafka-server-start.sh ]]; then
    brokers+=("kafka|Apache Kafka|acks=all, page cache (no fsync)")
  else
    skipped+=("Apache Kafka: KAFKA_HOME is not set to a Kafka install (bin/kafka-server-start.sh)")
  fi
fi
if wanted redpanda; then
  if command -v rpk >/dev/null; then
    brokers+=("redpanda|Redpanda|acks=all, fsync")
  else
    skipped+=("Redpanda: rpk is not on PATH")
  fi
fi

broker_pid=""
# wait_port PORT LOG: until something listens on 127.0.0.1:PORT (exits after 60 s).
wait_port() {
  for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "a broker did not listen on $1 within 60 s (see $2)" >&2
  exit 1
}

# start NAME DIR: the broker NAME on CPU 0 with its data in DIR; sets broker_pid
# and the address to drive (target: native, or kafka_target: a Kafka listener).
start() {
  local name=$1 dir=$2 port
  port=$(free_port)
  target="" kafka_target="127.0.0.1:$port" admin=""
  case "$name" in
    native|ringmq-kafka)
      local native
      native=$(free_port)
      admin=127.0.0.1:$(free_port)
      "$bin/ringmq" serve --data-dir "$dir/data" --listen "127.0.0.1:$native" --kafka-listen "127.0.0.1:$port" \
        --admin-listen "$admin" --cores 0 --segment-mib 256 --cache-mib 128 >"$dir/broker.out" 2>"$dir/broker.err" &
      broker_pid=$!
      [[ $name == native ]] && target="127.0.0.1:$native"
      ;;
    tansu)
      taskset -c 0 "$tansu" broker --listener-url "tcp://127.0.0.1:$port" \
        --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine memory://tansu/ \
        >"$dir/broker.out" 2>"$dir/broker.err" &
      broker_pid=$!
      ;;
    kafka)
      local controller cluster
      controller=$(free_port)
      cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
PROPS
      cluster=$("$KAFKA_HOME/bin/kafka-storage.sh" random-uuid)
      "$KAFKA_HOME/bin/kafka-storage.sh" format -t "$cluster" -c "$dir/server.properties" >"$dir/format.out" 2>&1
      taskset -c 0 "$KAFKA_HOME/bin/kafka-server-start.sh" "$dir/server.properties" \
        >"$dir/broker.out" 2>"$dir/broker.err" &
      broker_pid=$!
      ;;
    redpanda)
      local admin rpc
      admin=$(free_port) rpc=$(free_port)
      taskset -c 0 rpk redpanda start --smp 1 --memory 2G --overprovisioned --check=false \
        --config "$dir/redpanda.yaml" --kafka-addr "127.0.0.1:$port" --advertise-kafka-addr "127.0.0.1:$port" \
        --rpc-addr "127.0.0.1:$rpc" --advertise-rpc-addr "127.0.0.1:$rpc" \
        --set "redpanda.admin[0].address=127.0.0.1" --set "redpanda.admin[0].port=$admin" \
        --set "redpanda.data_directory=$dir/data" >"$dir/broker.out" 2>"$dir/broker.err" &
      broker_pid=$!
      ;;
  esac
  pids+=("$broker_pid")
  wait_port "$port" "$dir/broker.err"
}

# stop: the running broker (run removes its data).
stop() {
  kill "$broker_pid" 2>/dev/null || true
  wait "$broker_pid" 2>/dev/null || true
}

# The process (and its children: Kafka's start script runs a JVM) CPU ticks.
ticks() {
  local total=0 p
  for p in $1 $(pgrep -P "$1" || true); do
    [[ -r /proc/$p/stat ]] && total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$total"
}

# run ENTRY WORKLOAD ROUND: one broker started, driven once, stopped.
run() {
  local name label durability workload=$2 round=$3
  IFS='|' read -r name label durability <<<"$1"
  local dir=$out/$workload-$name-$round
  mkdir -p "$dir"
  start "$name" "$dir"
  local rate=0 extra=()
  case "$workload" in
    10k) rate=10000 ;;
    50k) rate=50000 ;;
    max) extra=(--max-outstanding 256) ;;
  esac
  if [[ -n $target ]]; then
    extra+=(--broker "$target")
  else
    extra+=(--protocol kafka --kafka-broker "$kafka_target" --replication-factor 1)
  fi
  echo "run $workload-$name-$round: $label at ${rate/#0/max} msgs/s for ${duration}s" >&2
  local before after busy_before
  before=$(ticks "$broker_pid")
  [[ -n $admin ]] && busy_before=$(shard_busy_seconds "$admin")
  LD_LIBRARY_PATH=${rdkafka_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    "$bin/ringmq-bench" run --client-cores 1 --warmup 2s --duration "${duration}s" --out "$dir" \
    --queues 8 --producers 2 --consumers 1 --message-size 1024 --rate "$rate" --mode async \
    --label "$label" --durability "$durability" "${extra[@]}" >"$dir/bench.log" 2>&1 \
    || echo "the $workload-$name-$round run failed (see $dir/bench.log)" >&2
  after=$(ticks "$broker_pid")
  echo $((after - before)) >"$dir/broker-ticks"
  # ringmq's shards poll their CPU while idle: their busy time is their work.
  [[ -n $admin ]] && shard_busy_since "$admin" "$busy_before" >"$dir/broker-busy"
  stop
  rm -rf "$dir/data"
}

for s in "${skipped[@]}"; do echo "skipped $s" >&2; done
((${#brokers[@]})) || { echo "no broker to run" >&2; exit 1; }
for workload in 10k 50k max; do
  for round in $(seq "$rounds"); do
    for entry in "${brokers[@]}"; do run "$entry" "$workload" "$round"; done
  done
done

# One chart per workload, every run's curve on the axes of all of them.
names=()
for entry in "${brokers[@]}"; do names+=("${entry%%|*}"); done
all=()
for workload in 10k 50k max; do
  for name in "${names[@]}"; do [[ -f $out/$workload-$name-1/e2e.hgrm ]] && all+=(--axes-of "$out/$workload-$name-1"); done
done
for workload in 10k 50k max; do
  runs=()
  for name in "${names[@]}"; do [[ -f $out/$workload-$name-1/e2e.hgrm ]] && runs+=("$out/$workload-$name-1"); done
  ((${#runs[@]})) && "$bin/ringmq-bench" compare "${runs[@]}" "${all[@]}" --out-dir "$out/chart-$workload" \
    >"$out/chart-$workload.txt"
done

OUT="$out" ROUNDS="$rounds" TICK="$(getconf CLK_TCK)" NAMES="${names[*]}" SKIPPED="$(printf '%s\n' "${skipped[@]}")" \
  python3 - <<'PY'
import json, os, statistics
out, rounds, tick = os.environ["OUT"], int(os.environ["ROUNDS"]), int(os.environ["TICK"])
names = os.environ["NAMES"].split()
def load(workload, name, r):
    d = os.path.join(out, f"{workload}-{name}-{r}")
    try:
        s = json.load(open(os.path.join(d, "summary.json")))
        s["broker_us"] = int(open(os.path.join(d, "broker-ticks")).read()) / tick * 1e6 / max(1, s["received"])
        busy = os.path.join(d, "broker-busy")
        s["busy_us"] = float(open(busy).read()) * 1e6 / max(1, s["received"]) if os.path.exists(busy) else None
        return s
    except (OSError, ValueError):
        return None
def median(values):
    return statistics.median(values) if values else None
print(f"{'workload':<8} {'broker':<28} {'durability':<32} {'msgs/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} "
      f"{'broker us/msg':>13} {'busy us/msg':>11} {'lost':>5} {'x msgs/s':>9} {'x p99':>6} {'x us/msg':>8}")
for workload in ["10k", "50k", "max"]:
    rows = {}
    for name in names:
        runs = [s for s in (load(workload, name, r) for r in range(1, rounds + 1)) if s]
        if not runs:
            print(f"{workload:<8} {name:<28} (no result: see {out}/{workload}-{name}-*/bench.log)")
            continue
        rows[name] = {
            "broker": runs[0]["broker"], "durability": runs[0]["durability"],
            "msgs": median([s["msgs_per_s"] for s in runs]),
            "p50": median([s["e2e"]["p50_us"] / 1e3 for s in runs]),
            "p99": median([s["e2e"]["p99_us"] / 1e3 for s in runs]),
            "p999": median([s["e2e"]["p999_us"] / 1e3 for s in runs]),
            "us": median([s["broker_us"] for s in runs]),
            "busy": median([s["busy_us"] for s in runs if s["busy_us"] is not None]),
            "lost": sum(s["lost"] for s in runs),
        }
    base = rows.get("native")
    for name, r in rows.items():
        x = lambda key: f"{r[key] / base[key]:.2f}" if base and base[key] else "-"
        busy = f"{r['busy']:.2f}" if r["busy"] is not None else "-"
        print(f"{workload:<8} {r['broker'][:28]:<28} {r['durability'][:32]:<32} {r['msgs']:>9.0f} {r['p50']:>8.3f} "
              f"{r['p99']:>8.3f} {r['p999']:>9.3f} {r['us']:>13.2f} {busy:>11} {r['lost']:>5} {x('msgs'):>9} {x('p99'):>6} {x('us'):>8}")
print("broker us/msg: its process's CPU time (ringmq's counts its shards' idle spin); busy us/msg: ringmq's shards at work")
print("x: ratio to ringmq native (msgs/s: higher is better; p99 and broker us/msg: lower is better); "
      f"medians of {rounds} round(s)")
for line in filter(None, os.environ["SKIPPED"].splitlines()):
    print(f"skipped {line}")
print(f"runs and charts (chart-10k, chart-50k, chart-max) in {out}")
PY
