#!/usr/bin/env bash
# Drives one broker (ringmq serve, CPU 0) with the bundled load generator
# (CPU 1) over the native protocol and over its Kafka listener (librdkafka),
# alternating, and prints each run's msgs/s, e2e p50/p99, the broker's busy
# time and CPU per message, the load generator's CPU per message, and the
# Kafka runs as ratios of the native ones (medians of the rounds). Three
# workloads: as fast as possible (durable msgs/s), an open-loop 10,000
# msgs/s (latency) and 100,000 msgs/s (the broker's cost per message at a
# load both clients keep up with). On a 2-CPU host librdkafka's threads and
# the native client share the load generator's CPU: at full speed it is
# the client's CPU per message that sets the ratio.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/pairs-lib.sh"
parse_pair_args native/kafka "$@"
pkg-config --exists rdkafka || { echo "needs librdkafka (Debian: librdkafka-dev)" >&2; exit 1; }
(cd "$root" && cargo build --release -q -p ringmq && cargo build --release -q -p ringmq-bench --features kafka)
bin=$root/target/release

# run NAME PROTOCOL RATE: a fresh broker with its Kafka listener, one load-generator run.
run() {
  local name=$1 protocol=$2 offered=$3
  mkdir -p "$out/$name"
  local port kafka
  port=$(free_port) kafka=$(free_port)
  start_broker "$out/$name" --listen "127.0.0.1:$port" --kafka-listen "127.0.0.1:$kafka" --cores 0 \
    --segment-mib 256 --cache-mib 128
  echo "run $name: $protocol at ${offered:-max} msgs/s for ${duration}s" >&2
  # Named as ringmq's: the Kafka runs reach its listener from outside, which names itself by its cluster id.
  local label="ringmq native"
  [[ $protocol == kafka ]] && label="ringmq Kafka listener"
  bench_run "$name" --broker "127.0.0.1:$port" --kafka-broker "127.0.0.1:$kafka" --protocol "$protocol" \
    --rate "$offered" --label "$label"
}

for workload in $(workloads); do
  offered=$(offered "$workload")
  for r in $(seq "$rounds"); do
    run "$workload-native-$r" native "$offered"
    run "$workload-kafka-$r" kafka "$offered"
  done
done

summarize native kafka
