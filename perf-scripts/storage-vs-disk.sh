#!/usr/bin/env bash
# Runs ringmq's storage-bench and fio on the same disk and CPU in one go and
# prints the ratios that matter: the engine's durable MB/s against fio's
# write+fdatasync MB/s at the engine's mean group-commit batch size, and the
# records/s of many concurrent writers against one writer.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--dir DIR] [--writers N] [--record-size BYTES] [--duration SECS] [--cpu N]
  --dir DIR            directory on the disk under test (default: ./storage-vs-disk-data)
  --writers N          concurrent writers of the main run (default: 64)
  --record-size BYTES  record size (default: 1024)
  --duration SECS      seconds per run (default: 10)
  --cpu N              CPU for the engine and fio (default: the last CPU)
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
dir=./storage-vs-disk-data writers=64 size=1024 duration=10 cpu=$(( $(nproc) - 1 ))
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --writers) writers=$2; shift 2 ;;
    --record-size) size=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

(cd "$root" && cargo build --release -q -p ringmq-bench --bin storage-bench)
bench="$root/target/release/storage-bench"
common=(--record-size "$size" --duration "$duration" --cpu "$cpu" --dir "$dir/engine" --json)

echo "engine: $writers writers x $size B, sync flush, CPU $cpu, ${duration}s" >&2
many=$("$bench" --writers "$writers" "${common[@]}")
batch=$(python3 -c 'import json,sys; print(int(json.loads(sys.argv[1])["mean_batch_bytes"]))' "$many")
# The engine writes whole pages: its mean write is the mean batch rounded up to 4 KiB.
bs=$(( (batch + 4095) / 4096 * 4096 ))
# fio runs before and after the engine's second run, so a noisy neighbour's
# change during the measurement shows up as the spread of the two.
echo "fio: ${bs} B writes + fdatasync on CPU $cpu" >&2
disk1=$("$here/disk-baseline.sh" --dir "$dir/fio" --bs "$bs" --runtime "$duration" --cpu "$cpu" --json)
echo "engine: $writers writers again, then 1 writer" >&2
many2=$("$bench" --writers "$writers" "${common[@]}")
one=$("$bench" --writers 1 "${common[@]}")
echo "fio again" >&2
disk2=$("$here/disk-baseline.sh" --dir "$dir/fio" --bs "$bs" --runtime "$duration" --cpu "$cpu" --json)
# The engine zero-fills each new segment before writing it (every log byte is
# written twice); this fio run does the same disk work: the same sync writes
# plus a sequential fill at the engine's rate.
fill=$(python3 -c 'import json,sys; print(int(json.loads(sys.argv[1])["mb_per_s"]))' "$many")
echo "fio with a concurrent ${fill} MB/s sequential fill" >&2
filled=$("$here/disk-baseline.sh" --dir "$dir/fio" --bs "$bs" --runtime "$duration" --cpu "$cpu" --fill-mbps "$fill" --json)
rmdir "$dir" 2>/dev/null || true

MANY="$many" MANY2="$many2" ONE="$one" DISK="$disk1" DISK2="$disk2" FILLED="$filled" python3 - <<'PY'
import json, os
many, many2, one, disk, disk2, filled = (json.loads(os.environ[k]) for k in ("MANY", "MANY2", "ONE", "DISK", "DISK2", "FILLED"))
for run in (many, many2):
    print(f"engine  {run['writers']:>3} writers: {run['records_per_s']:>9} records/s {run['mb_per_s']:>8.1f} MB/s  "
          f"mean batch {run['mean_batch_records']} records / {run['mean_batch_bytes']} B  "
          f"p50 {run['p50_us']} us p99 {run['p99_us']} us p99.9 {run['p999_us']} us  rss {run['rss_mib']} MiB")
print(f"fio runs: {disk['bs']} B write+fdatasync {disk['mb_per_s']:.1f} and {disk2['mb_per_s']:.1f} MB/s")
many = {**many, "mb_per_s": (many["mb_per_s"] + many2["mb_per_s"]) / 2, "records_per_s": (many["records_per_s"] + many2["records_per_s"]) / 2}
disk = {**disk, "mb_per_s": (disk["mb_per_s"] + disk2["mb_per_s"]) / 2, "writes_per_s": (disk["writes_per_s"] + disk2["writes_per_s"]) / 2}
print(f"engine  {many['writers']:>3} writers: {many['records_per_s']:>9} records/s {many['mb_per_s']:>8.1f} MB/s  "
      f"mean batch {many['mean_batch_records']} records / {many['mean_batch_bytes']} B  "
      f"p50 {many['p50_us']} us p99 {many['p99_us']} us p99.9 {many['p999_us']} us  rss {many['rss_mib']} MiB")
print(f"engine    1 writer:  {one['records_per_s']:>9} records/s {one['mb_per_s']:>8.1f} MB/s  p50 {one['p50_us']} us p99 {one['p99_us']} us")
print(f"fio     {disk['bs']} B write+fdatasync: {disk['mb_per_s']:>8.1f} MB/s {disk['writes_per_s']:.0f} writes/s  "
      f"sync p50 {disk['sync_p50_us']} us p99 {disk['sync_p99_us']} us")
print(f"means: engine {many['mb_per_s']:.1f} MB/s, fio {disk['mb_per_s']:.1f} MB/s")
print(f"ratio   engine MB/s / fio MB/s at the engine's batch size: {many['mb_per_s'] / disk['mb_per_s']:.2f}  (target >= 0.80)")
print(f"fio     same writes + {filled['fill_mbps']} MB/s sequential fill (the zero-fill of new segments): {filled['mb_per_s']:.1f} MB/s")
print(f"ratio   engine MB/s / fio MB/s doing the same disk work (sync writes + segment zero-fill): {many['mb_per_s'] / filled['mb_per_s']:.2f}")
print(f"ratio   {many['writers']} writers / 1 writer records/s: {many['records_per_s'] / one['records_per_s']:.1f}x  (target >= 20x)")
PY
