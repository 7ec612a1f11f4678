# Sourced by the scripts that run the Apache Java client's producer
# (java/TxnThroughput.java) against a fresh broker per run
# (txn-vs-idempotent.sh, java-producer.sh): the client compiled, and the
# broker started (one shard, CPU 0) and stopped. Needs $here and $root.

# java_setup: the client's jars on $jars (a classpath ending in ':'), the
# release broker in $bin, a temp dir in $out with the compiled client in
# $out/classes; exits saying what to install when the jars or a JDK are missing.
java_setup() {
  local jars_dir=${RINGMQ_JARS:-$HOME/.cache/ringmq-tests/jars}
  jars=$(ls "$jars_dir"/*.jar 2>/dev/null | tr '\n' ':') || true
  [[ -n $jars ]] || { echo "no jars in $jars_dir: run tests/run.sh once (it downloads them)" >&2; exit 1; }
  command -v javac >/dev/null || { echo "needs a JDK (Debian: default-jdk-headless)" >&2; exit 1; }
  (cd "$root" && cargo build --release -q -p ringmq)
  bin=$root/target/release
  out=$(mktemp -d)
  javac -nowarn -cp "$jars" -d "$out/classes" "$here/java/TxnThroughput.java"
}

broker=""
stop_broker() { [[ -n $broker ]] && { kill "$broker" 2>/dev/null || true; wait "$broker" 2>/dev/null || true; }; broker=""; }
trap stop_broker EXIT
# shellcheck source=processes.sh
source "$(dirname "${BASH_SOURCE[0]}")/processes.sh" # free_port

# start_broker DIR PARTITIONS [serve flags...]: ringmq serve on CPU 0 with
# its data in DIR/data and its Kafka listener on $kafka, waited for, and
# the topic `tput` of PARTITIONS queues made.
start_broker() {
  local dir=$1 partitions=$2 port
  shift 2
  port=$(free_port) kafka=$(free_port)
  taskset -c 0 "$bin/ringmq" serve --data-dir "$dir/data" --listen "127.0.0.1:$port" --kafka-listen "127.0.0.1:$kafka" \
    --cores 0 --segment-mib 256 --cache-mib 128 "$@" >"$dir/serve.out" 2>"$dir/serve.err" &
  broker=$!
  for _ in $(seq 200); do grep -q listening "$dir/serve.out" 2>/dev/null && break; sleep 0.1; done
  "$bin/ringmq" topic create tput --queues "$partitions" --broker "127.0.0.1:$port" >/dev/null
}
