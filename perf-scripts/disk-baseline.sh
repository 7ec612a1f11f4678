#!/usr/bin/env bash
# Measures the disk's own limit for ringmq's durable write pattern: sequential
# O_DIRECT writes of --bs bytes, each followed by one fdatasync, into a file
# that was written before (like ringmq's zero-filled segments). Prints MB/s,
# writes/s and fdatasync latency percentiles; --json prints one JSON object.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--dir DIR] [--bs BYTES] [--runtime SECS] [--size MIB] [--cpu N] [--rate-mbps N] [--fill-mbps N] [--json]
  --dir DIR       directory on the disk to measure (default: ./fio-baseline-data, removed after)
  --bs BYTES      bytes per write, each followed by fdatasync (default: 4096)
  --runtime SECS  seconds to measure (default: 10)
  --size MIB      size of the test file (default: 1024)
  --cpu N         pin fio to this CPU (default: unpinned)
  --rate-mbps N   pace the write+fdatasync pairs to N MB/s, an engine's append rate, instead of
                  running them back to back (default: 0, back to back)
  --fill-mbps N   meanwhile write 1 MiB blocks sequentially to a second file at N MB/s: the
                  disk work of zero-filling new segments ahead of an engine appending N MB/s
  --json          print {"bs":..,"mb_per_s":..,"writes_per_s":..,"sync_p50_us":..,...}
USAGE
}

dir=./fio-baseline-data bs=4096 runtime=10 size=1024 cpu="" json=0 fill=0 rate=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --bs) bs=$2; shift 2 ;;
    --runtime) runtime=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --rate-mbps) rate=$2; shift 2 ;;
    --fill-mbps) fill=$2; shift 2 ;;
    --json) json=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

# shellcheck source=lib/tools.sh
source "$(dirname "$0")/lib/tools.sh"
need_fio

mkdir -p "$dir"
cleanup() { rm -f "$dir/fio-baseline.test" "$dir/fio-fill.test"; rmdir "$dir" 2>/dev/null || true; }
trap cleanup EXIT

pin=()
[[ -n "$cpu" ]] && pin=(taskset -c "$cpu")
pace=()
[[ "$rate" != 0 ]] && pace=(--rate="${rate}m")
fill_job=()
if [[ "$fill" != 0 ]]; then
  fill_job=(--name=fill --filename="$dir/fio-fill.test" --size=4G --bs=1M --rw=write --direct=1 \
    --ioengine=psync --rate="${fill}m" --runtime="$runtime" --time_based)
fi
out=$("${pin[@]}" fio --output-format=json --name=write-fdatasync --filename="$dir/fio-baseline.test" --size="${size}M" \
  --bs="$bs" --rw=write --direct=1 --ioengine=psync --fdatasync=1 --iodepth=1 \
  --runtime="$runtime" --time_based --loops=1000 "${pace[@]}" "${fill_job[@]}")

FIO_JSON="$out" BS="$bs" RATE="$rate" FILL="$fill" AS_JSON="$json" python3 - <<'PY'
import json, os
job = json.loads(os.environ["FIO_JSON"])["jobs"][0]
w, s = job["write"], job["sync"]
pct = s["lat_ns"].get("percentile", {})
def us(key): return round(pct.get(key, 0) / 1000, 1)
r = {
    "bs": int(os.environ["BS"]),
    "rate_mbps": int(os.environ["RATE"]),
    "fill_mbps": int(os.environ["FILL"]),
    "mb_per_s": round(w["bw_bytes"] / 1e6, 2),
    "writes_per_s": round(w["iops"], 0),
    "write_p50_us": round(w["clat_ns"]["percentile"]["50.000000"] / 1000, 1),
    "write_p99_us": round(w["clat_ns"]["percentile"]["99.000000"] / 1000, 1),
    "sync_p50_us": us("50.000000"),
    "sync_p99_us": us("99.000000"),
    "sync_p999_us": us("99.900000"),
    "sync_p9999_us": us("99.990000"),
    "sync_max_us": round(s["lat_ns"]["max"] / 1000, 1),
}
# One durable write is a write followed by its fdatasync: the sum of the two
# p99s bounds the p99 of the pair from above.
r["write_plus_sync_p99_us"] = round(r["write_p99_us"] + r["sync_p99_us"], 1)
if os.environ["AS_JSON"] == "1":
    print(json.dumps(r))
else:
    for k, v in r.items():
        print(f"{k:>22}  {v}")
PY
