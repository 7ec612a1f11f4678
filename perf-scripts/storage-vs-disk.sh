#!/usr/bin/env bash
# Runs ringmq's storage-bench and fio on the same disk and CPU in one go and
# prints the ratios that matter:
#   - steady state (size retention active, every new segment recycled from a
#     retired one, nothing zero-filled): the engine's durable MB/s against
#     fio's write+fdatasync MB/s at the engine's mean group-commit batch size;
#   - growing log (every new segment zero-filled): the engine against fio
#     doing the same writes beside a sequential fill at the engine's rate;
#   - the records/s of many concurrent writers against one writer.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--dir DIR] [--writers N] [--record-size BYTES] [--duration SECS] [--cpu N]
          [--segment-mib N] [--retention-mib N]
  --dir DIR            directory on the disk under test (default: ./storage-vs-disk-data)
  --writers N          concurrent writers of the main run (default: 64)
  --record-size BYTES  record size (default: 1024)
  --duration SECS      seconds per run (default: 10)
  --cpu N              CPU for the engine and fio (default: the last CPU)
  --segment-mib N      segment size of the steady-state runs (default: 128)
  --retention-mib N    size retention of the steady-state runs (default: 512); their
                       warm-up writes past it so that every new segment is recycled
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
dir=./storage-vs-disk-data writers=64 size=1024 duration=10 cpu=$(( $(nproc) - 1 )) segment=128 retention=512
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --writers) writers=$2; shift 2 ;;
    --record-size) size=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --segment-mib) segment=$2; shift 2 ;;
    --retention-mib) retention=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

(cd "$root" && cargo build --release -q -p ringmq-bench --bin storage-bench)
bench="$root/target/release/storage-bench"
common=(--record-size "$size" --duration "$duration" --cpu "$cpu" --dir "$dir/engine" --json)
# The warm-up writes the retention bound and a few segments more at ~200 MB/s or faster.
warm=$(( (retention + 4 * segment) / 200 + 1 ))
steady=(--segment-mib "$segment" --retention-mib "$retention" --warmup "$warm")

echo "engine, steady state: $writers writers x $size B, sync flush, CPU $cpu, ${warm}s warm-up, ${duration}s" >&2
steady1=$("$bench" --writers "$writers" "${steady[@]}" "${common[@]}")
batch=$(python3 -c 'import json,sys; print(int(json.loads(sys.argv[1])["mean_batch_bytes"]))' "$steady1")
# The engine writes whole pages: its mean write is the mean batch rounded up to 4 KiB.
bs=$(( (batch + 4095) / 4096 * 4096 ))
# fio runs between and after the engine's runs, so a noisy neighbour's
# change during the measurement shows up as the spread of the two.
echo "fio: ${bs} B writes + fdatasync on CPU $cpu" >&2
disk1=$("$here/disk-baseline.sh" --dir "$dir/fio" --bs "$bs" --runtime "$duration" --cpu "$cpu" --json)
echo "engine, steady state again; a growing log; then 1 writer" >&2
steady2=$("$bench" --writers "$writers" "${steady[@]}" "${common[@]}")
many=$("$bench" --writers "$writers" "${common[@]}")
one=$("$bench" --writers 1 "${common[@]}")
echo "fio again" >&2
disk2=$("$here/disk-baseline.sh" --dir "$dir/fio" --bs "$bs" --runtime "$duration" --cpu "$cpu" --json)
# A growing log zero-fills each new segment before writing it (every log
# byte is written twice); this fio run does the same disk work: the same
# sync writes plus a sequential fill at the engine's rate.
fill=$(python3 -c 'import json,sys; print(int(json.loads(sys.argv[1])["mb_per_s"]))' "$many")
echo "fio with a concurrent ${fill} MB/s sequential fill" >&2
filled=$("$here/disk-baseline.sh" --dir "$dir/fio" --bs "$bs" --runtime "$duration" --cpu "$cpu" --fill-mbps "$fill" --json)
rmdir "$dir" 2>/dev/null || true

STEADY1="$steady1" STEADY2="$steady2" MANY="$many" ONE="$one" DISK="$disk1" DISK2="$disk2" FILLED="$filled" python3 - <<'PY'
import json, os
steady1, steady2, many, one, disk, disk2, filled = (json.loads(os.environ[k]) for k in ("STEADY1", "STEADY2", "MANY", "ONE", "DISK", "DISK2", "FILLED"))
def line(name, run):
    print(f"engine  {name:<22} {run['writers']:>3} writers: {run['records_per_s']:>9} records/s {run['mb_per_s']:>8.1f} MB/s  "
          f"mean batch {run['mean_batch_records']} records / {run['mean_batch_bytes']} B  "
          f"p50 {run['p50_us']} us p99 {run['p99_us']} us p99.9 {run['p999_us']} us  "
          f"segments made {run['segments_created']} recycled {run['segments_recycled']}  zero-filled {run['zero_fill_bytes'] / 2**20:.0f} MiB  "
          f"a write in flight {run['write_busy'] * 100:.1f}% of the time")
line("steady state", steady1)
line("steady state again", steady2)
line("growing log", many)
print(f"engine  {'growing log':<22}   1 writer:  {one['records_per_s']:>9} records/s {one['mb_per_s']:>8.1f} MB/s  p50 {one['p50_us']} us p99 {one['p99_us']} us")
for run in (steady1, steady2):
    if run["zero_fill_bytes"] or run["segments_created"]:
        print("WARNING: a steady-state run made new segments: raise --retention-mib's warm-up or the pool")
print(f"fio     {disk['bs']} B write+fdatasync: {disk['mb_per_s']:.1f} and {disk2['mb_per_s']:.1f} MB/s, "
      f"{(disk['writes_per_s'] + disk2['writes_per_s']) / 2:.0f} writes/s, sync p50 {disk['sync_p50_us']} us p99 {disk['sync_p99_us']} us")
steady_mb = (steady1["mb_per_s"] + steady2["mb_per_s"]) / 2
disk_mb = (disk["mb_per_s"] + disk2["mb_per_s"]) / 2
print(f"means: engine steady state {steady_mb:.1f} MB/s, fio {disk_mb:.1f} MB/s")
print(f"ratio   steady state: engine MB/s / fio MB/s at the engine's batch size: {steady_mb / disk_mb:.2f}  (target >= 0.95)")
# fio keeps a write in flight all the time; the engine leaves the disk idle
# while it acknowledges a round and its writers append the next one.
busy = (steady1["write_busy"] + steady2["write_busy"]) / 2
idle_us = sum((1 - r["write_busy"]) * r["seconds"] * 1e6 / max(r["fsyncs"], 1) for r in (steady1, steady2)) / 2
print(f"engine  steady state: a durable write in flight {busy * 100:.1f}% of the time, "
      f"the disk idle {idle_us:.0f} us between rounds")
print(f"ratio   growing log: engine MB/s / fio MB/s: {many['mb_per_s'] / disk_mb:.2f}")
print(f"fio     same writes + {filled['fill_mbps']} MB/s sequential fill (the zero-fill of new segments): {filled['mb_per_s']:.1f} MB/s")
print(f"ratio   growing log: engine MB/s / fio MB/s doing the same disk work (sync writes + segment zero-fill): {many['mb_per_s'] / filled['mb_per_s']:.2f}")
print(f"ratio   steady state / growing log, engine MB/s: {steady_mb / many['mb_per_s']:.2f}")
print(f"ratio   {many['writers']} writers / 1 writer records/s: {many['records_per_s'] / one['records_per_s']:.1f}x  (target >= 20x)")
PY
