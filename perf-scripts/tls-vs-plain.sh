#!/usr/bin/env bash
# TLS against the clear on one broker (ringmq serve, CPU 0) driven by the
# bundled load generator (CPU 1): runs in the clear and over TLS alternate,
# each against a fresh broker, and the script prints each run's msgs/s and
# e2e p50/p99, the broker's CPU per message, and TLS as ratios of the clear
# (medians of the rounds). Three workloads: as fast as possible (durable
# msgs/s), the README's open-loop 10,000 msgs/s (2 producers, 2
# consumers, 8 queues, 1 KiB) and 100,000 msgs/s (the broker's cost per
# message at equal load). Certificates are made with openssl (P-256).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
source "$here/pairs-lib.sh"
parse_pair_args clear/TLS "$@"
mkdir -p "$out/certs"
(cd "$root" && cargo build --release -q -p ringmq && cargo build --release -q -p ringmq-bench)
bin=$root/target/release

certs=$out/certs
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$certs/ca.key" -out "$certs/ca.pem" \
  -days 2 -subj /CN=bench-ca 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$certs/broker.key" -out "$certs/broker.csr" \
  -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$certs/broker.ext"
openssl x509 -req -in "$certs/broker.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" -CAcreateserial -days 2 \
  -extfile "$certs/broker.ext" -out "$certs/broker.pem" 2>/dev/null

# run NAME MODE RATE: a fresh broker in the clear or serving TLS, one load-generator run.
run() {
  local name=$1 mode=$2 offered=$3
  mkdir -p "$out/$name"
  local port serve_tls=() bench_tls=()
  port=$(free_port)
  if [[ $mode == tls ]]; then
    serve_tls=(--tls-cert "$certs/broker.pem" --tls-key "$certs/broker.key")
    bench_tls=(--tls-ca "$certs/ca.pem")
  fi
  start_broker "$out/$name" --listen "127.0.0.1:$port" --cores 0 --segment-mib 256 --cache-mib 128 "${serve_tls[@]}"
  echo "run $name: $mode at ${offered:-max} msgs/s for ${duration}s" >&2
  bench_run "$name" --broker "127.0.0.1:$port" "${bench_tls[@]}" --rate "$offered"
}

for workload in $(workloads); do
  offered=$(offered "$workload")
  for r in $(seq "$rounds"); do
    run "$workload-plain-$r" plain "$offered"
    run "$workload-tls-$r" tls "$offered"
  done
done

summarize plain tls
