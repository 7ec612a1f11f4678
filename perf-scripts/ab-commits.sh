#!/usr/bin/env bash
# A/B of two commits in one run: builds the old commit in a git worktree,
# then alternates old and new (old first) for the README main job (e2e p50
# and p99), for storage-bench with 64 writers (records/s) and for the
# client's CPU per message (an embedded run as fast as it goes, `--rate 0`:
# the SDK's threads, and SDK plus the load generator's producers and
# consumers, us/msg from /proc task times), and prints each pair and the
# new/old ratios of the medians.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 --old REV [--runs N] [--job-secs S] [--bench-secs S] [--dir DIR]
  --old REV         the commit to compare against (e.g. HEAD~5)
  --runs N          alternating runs of each (default: 3)
  --job-secs S      measured seconds of each main-job run (default: 30, as README's command)
  --bench-secs S    measured seconds of each storage-bench run (default: 10)
  --cpu-secs S      measured seconds of each client-cost run (default: 10)
  --dir DIR         scratch directory (default: target/ab)
USAGE
}

old='' runs=3 job_secs=30 bench_secs=10 cpu_secs=10 dir=target/ab
while [[ $# -gt 0 ]]; do
  case "$1" in
    --old) old=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --job-secs) job_secs=$2; shift 2 ;;
    --bench-secs) bench_secs=$2; shift 2 ;;
    --cpu-secs) cpu_secs=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -n "$old" ]] || { usage >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
tree="$dir/old-tree"
rev=$(git rev-parse --short "$old")
if [[ ! -d "$tree" ]] || [[ "$(git -C "$tree" rev-parse --short HEAD)" != "$rev" ]]; then
  git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
  git worktree add --detach -f "$tree" "$rev" >/dev/null
fi
echo "== building old ($rev) and new ($(git rev-parse --short HEAD))"
(cd "$tree" && CARGO_TARGET_DIR="$tree/target" cargo build --release -q -p ringmq-bench)
cargo build --release -q -p ringmq-bench
declare -A bin=([old]="$tree/target/release" [new]="$root/target/release")

job() { # side run -> "p50_us p99_us lost"
  local out="$dir/job-$1-$2"
  "${bin[$1]}/ringmq-bench" run --embedded --duration "${job_secs}s" --out "$out" >"$out.log" 2>&1
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); e=r["e2e"]; print(e["p50_us"], e["p99_us"], r["lost"])' "$out/summary.json"
}
bench() { # side run -> "records_per_s"
  "${bin[$1]}/storage-bench" --writers 64 --duration "$bench_secs" --dir "$dir/bench-$1-$2" --json 2>/dev/null \
    | python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r["records_per_s"]))'
}
client_cost() { # side run -> "sdk_us client_us" per message
  local out="$dir/cpu-$1-$2"
  "${bin[$1]}/ringmq-bench" run --embedded --rate 0 --duration "${cpu_secs}s" --warmup 3s --out "$out" >"$out.log" 2>&1
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["cpu_us_per_msg"]
print(c["client_library"], round(c["client_library"] + c["producers"] + c["consumers"], 3))' "$out/summary.json"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

declare -A p50 p99 rps
echo "== README main job, e2e us (old then new, $runs pairs)"
for i in $(seq "$runs"); do
  for side in old new; do
    read -r a b lost < <(job "$side" "$i")
    echo "$side run $i: p50 $a p99 $b lost $lost"
    p50[$side]+="$a "; p99[$side]+="$b "
  done
done
echo "== storage-bench, 64 writers, records/s"
for i in $(seq "$runs"); do
  for side in old new; do
    r=$(bench "$side" "$i")
    echo "$side run $i: $r records/s"
    rps[$side]+="$r "
  done
done
declare -A sdk client
echo "== client CPU us/msg, --rate 0 (SDK threads; SDK + producers + consumers)"
for i in $(seq "$runs"); do
  for side in old new; do
    read -r a b < <(client_cost "$side" "$i")
    echo "$side run $i: sdk $a client $b"
    sdk[$side]+="$a "; client[$side]+="$b "
  done
done
for m in p50 p99 rps sdk client; do
  declare -n v=$m
  o=$(tr ' ' '\n' <<<"${v[old]}" | grep . | median)
  n=$(tr ' ' '\n' <<<"${v[new]}" | grep . | median)
  python3 -c "import sys; o,n=float(sys.argv[2]),float(sys.argv[3]); print(f'{sys.argv[1]:>6}: median old {o:g}, new {n:g}, new/old {n/o:.3f}')" "$m" "$o" "$n"
done
