# Sourced by the perf scripts that start brokers and etcd: the processes a
# script started (all stopped by stop_all, which it traps on EXIT), free
# loopback ports, an etcd of its own, a broker waited for, and its shards'
# busy time.

# cluster_run_setup: what a cluster script needs before it starts anything:
# etcd on PATH, then run_setup.
cluster_run_setup() {
  command -v etcd >/dev/null || { echo "needs etcd (Debian: etcd-server)" >&2; exit 1; }
  run_setup
}

# run_setup: $out made (a temp dir when empty), and release binaries in
# $bin (built from $root unless $bin names a build already).
run_setup() {
  [[ -n $out ]] || out=$(mktemp -d)
  mkdir -p "$out"
  if [[ -z ${bin:-} ]]; then
    (cd "$root" && cargo build --release -q -p ringmq -p ringmq-bench)
    bin=$root/target/release
  fi
}

pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# shard_busy_seconds ADMIN: the busy seconds of the shards of the broker
# whose admin listener is ADMIN: their work, without the idle spin that
# the process's CPU time counts.
shard_busy_seconds() {
  curl -s "http://$1/metrics" | awk '$1 ~ /^ringmq_shard_busy_seconds_total/ { s += $NF } END { printf "%.6f", s }'
}

# shard_busy_since ADMIN BEFORE: the busy seconds since shard_busy_seconds read BEFORE.
shard_busy_since() {
  awk -v a="$(shard_busy_seconds "$1")" -v b="$2" 'BEGIN { printf "%.6f\n", a - b }'
}

# start_etcd DIR LOG: an etcd on 127.0.0.1 with its data in DIR, waited for;
# sets etcd_url (etcd://127.0.0.1:PORT, for --cluster).
start_etcd() {
  local port peer
  port=$(free_port) peer="http://127.0.0.1:$(free_port)"
  etcd --data-dir "$1" --listen-client-urls "http://127.0.0.1:$port" \
    --advertise-client-urls "http://127.0.0.1:$port" --listen-peer-urls "$peer" \
    --initial-advertise-peer-urls "$peer" --initial-cluster "default=$peer" >"$2" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  etcd_url="etcd://127.0.0.1:$port"
}

# start_serve DIR LISTEN [serve flags...]: `$bin/ringmq serve` with its data in
# DIR/data and its output in DIR/serve.out and DIR/serve.err, waited for until
# it listens (the script exits if it does not).
start_serve() {
  local dir=$1 listen=$2
  shift 2
  mkdir -p "$dir"
  "$bin/ringmq" serve --data-dir "$dir/data" --listen "$listen" "$@" >"$dir/serve.out" 2>"$dir/serve.err" &
  pids+=($!)
  for _ in $(seq 200); do grep -q listening "$dir/serve.out" 2>/dev/null && return 0; sleep 0.1; done
  echo "a node did not start (see $dir/serve.err)" >&2
  exit 1
}
