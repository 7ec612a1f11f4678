#!/usr/bin/env bash
# The soak: a broker group of 3 nodes on etcd, all on this machine's cores,
# under everything at once for --minutes: the load generator's native
# producers and consumers at a fixed rate (one run per minute, so each
# minute has its own e2e percentiles and lost count), the Kafka clients'
# test phases (librdkafka and kafka-python: idempotent and compressed
# produce, seeks, groups joining and leaving, configs) against the Kafka
# listeners, a topic created and one deleted every few seconds, segment
# rollover (16 MiB segments) and size retention (1 GiB a shard: the
# three nodes take about 7 GiB of disk), and every --fault-every seconds
# the leader killed (kill -9, then started again) or paused past its lease (SIGSTOP,
# SIGCONT), in turn. Prints per minute e2e p99/p99.9, send errors (the
# async producer fails what it sent during a fail-over) and lost, each
# fail-over's gap (the fault to the first write taken), the shards' holds by
# cause (the watchdog's log) with the longest outside fail-overs, and each
# node's RSS at start and end. Exits 1 if a message was lost or a minute's
# run failed.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--minutes N] [--rate N] [--fault-every SECS] [--out DIR]
  --minutes N         load-generator minutes (default: 30)
  --rate N            msgs/s of the load generator (default: 2000)
  --fault-every SECS  a leader kill or pause this often (default: 180)
  --out DIR           keep logs and per-minute results here (default: a temp dir)
Needs etcd and the Kafka clients tests/run.sh installs.
USAGE
}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
minutes=30 rate=2000 fault_every=180 out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --fault-every) fault_every=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
command -v etcd >/dev/null || { echo "needs etcd (tests/run.sh installs it)" >&2; exit 1; }
/usr/bin/python3 -c 'import kafka, confluent_kafka' 2>/dev/null ||
  { echo "needs kafka-python and confluent-kafka (tests/run.sh installs them)" >&2; exit 1; }
[[ -n $out ]] || out=$(mktemp -d /var/tmp/soak.XXXX)
mkdir -p "$out"
(cd "$root" && cargo build --release -q -p ringmq -p ringmq-bench)
bin=$root/target/release
lease_ms=2000

# shellcheck source=lib/processes.sh
source "$here/lib/processes.sh"
# The nodes (restarted by the fault loop, so known by their pid files), then the rest.
stop_soak() {
  for n in 1 2 3; do [[ -f $out/n$n/pid ]] && kill -CONT "$(cat "$out/n$n/pid")" 2>/dev/null || true; done
  for n in 1 2 3; do [[ -f $out/n$n/pid ]] && kill "$(cat "$out/n$n/pid")" 2>/dev/null || true; done
  stop_all
  wait 2>/dev/null || true
}
trap stop_soak EXIT
now() { date +%s.%N; }

start_etcd "$out/etcd" "$out/etcd.log"
cluster=$etcd_url

# start_node N: node nN on 127.0.0.(70+N), its stdout and stderr appended to
# its directory (a restarted node keeps writing there).
declare -A listen kafka
start_node() {
  local n=$1
  mkdir -p "$out/n$n"
  "$bin/ringmq" serve --data-dir "$out/n$n/data" --listen "${listen[$n]}" --kafka-listen "${kafka[$n]}" \
    --cores 0,1 --cluster "$cluster" --broker-group soak --node "n$n" --lease-ms "$lease_ms" \
    --segment-mib 16 --cache-mib 32 --idle-spin-us 0 --completion-yield-us 0 --retention-gib 1 \
    >>"$out/n$n/out" 2>>"$out/n$n/err" &
  echo $! >"$out/n$n/pid"
  # Killed on purpose by the fault loop: not a job bash reports.
  disown
}
for n in 1 2 3; do
  ip="127.0.0.$((70 + n))"
  listen[$n]="$ip:$(free_port)" kafka[$n]="$ip:$(free_port)"
  start_node "$n"
  for _ in $(seq 300); do grep -q listening "$out/n$n/out" 2>/dev/null && break; sleep 0.1; done
done
boot=$(IFS=,; echo "${listen[*]}")
kboot=$(IFS=,; echo "${kafka[*]}")
status() { "$bin/ringmq" cluster status --cluster "$cluster" 2>/dev/null || true; }
leader() { status | sed -n 's/^broker_group=soak leader=n\([0-9]\) .*/\1/p'; }
in_sync() { status | sed -n 's/^broker_group=soak leader=.* isr=\(.*\)$/\1/p' | tr ',' '\n' | grep -c . || true; }
for _ in $(seq 600); do [[ $(in_sync) == 3 ]] && break; sleep 0.1; done
echo "soak: 3 nodes (${listen[*]}), $minutes minutes at $rate msgs/s, a fault every ${fault_every}s; logs in $out" >&2

# The Kafka clients' phases, again and again; each round deletes the topics it made.
kafka_clients() {
  local clients=$root/tests/kafka_clients
  while [[ ! -f $out/done ]]; do
    for phase in idempotent compressed seek group configs; do
      timeout 60 /usr/bin/python3 "$clients/python_confluent.py" "$kboot" "$phase" >>"$out/kafka.log" 2>&1 &&
        echo ok >>"$out/kafka.rounds" || echo failed >>"$out/kafka.rounds"
    done
    timeout 60 /usr/bin/python3 "$clients/python_group.py" "$kboot" >>"$out/kafka.log" 2>&1 || true
    # Retried: a round whose topics stay fails the next at its first create.
    for _ in 1 2 3; do
      timeout 60 /usr/bin/python3 - "$kboot" >>"$out/kafka.log" 2>&1 <<'PY' && break
import sys, kafka
a = kafka.KafkaAdminClient(bootstrap_servers=sys.argv[1].split(","), api_version=(2, 0))
mine = [t for t in a.list_topics() if not t.startswith(("__", "%", "soak-", "churn-"))]
if mine:
    a.delete_topics(mine, timeout_ms=30000)
PY
      sleep 2
    done
  done
}

# A topic created and the one before it deleted every 3 s.
churn() {
  local i=0
  while [[ ! -f $out/done ]]; do
    i=$((i + 1))
    timeout 20 "$bin/ringmq" topic create "churn-$i" --queues 4 --broker "$boot" >>"$out/churn.log" 2>&1 || true
    ((i > 1)) && { timeout 20 "$bin/ringmq" topic delete "churn-$((i - 1))" --broker "$boot" >>"$out/churn.log" 2>&1 || true; }
    sleep 3
  done
}

# Every 10 s: each node's resident memory.
rss() {
  while [[ ! -f $out/done ]]; do
    for n in 1 2 3; do
      kib=$(awk '/VmRSS/{print $2}' "/proc/$(cat "$out/n$n/pid")/status" 2>/dev/null || echo 0)
      echo "$(now) n$n $kib" >>"$out/rss.tsv"
    done
    sleep 10
  done
}

# Every --fault-every s the leader is killed or paused, in turn; a write is
# then tried every 200 ms until one is taken: the fail-over's gap.
faults() {
  local k=0
  while [[ ! -f $out/done ]]; do
    sleep "$fault_every"
    [[ -f $out/done ]] && break
    local n
    n=$(leader)
    [[ -n $n ]] || continue
    local pid kind at
    pid=$(cat "$out/n$n/pid") k=$((k + 1)) at=$(now)
    if ((k % 2)); then
      kind=kill
      kill -9 "$pid"
    else
      kind=pause
      kill -STOP "$pid"
    fi
    until echo probe | timeout 5 "$bin/ringmq" produce soak-probe --broker "$boot" >/dev/null 2>&1; do
      sleep 0.2
      if [[ $kind == pause ]] && (($(date +%s) - ${at%.*} > 3 * lease_ms / 1000)); then kill -CONT "$pid"; fi
    done
    echo "$at $(now) $kind n$n" >>"$out/faults.tsv"
    if [[ $kind == kill ]]; then
      start_node "$n"
    else
      sleep $((3 * lease_ms / 1000))
      kill -CONT "$pid"
    fi
  done
}

"$bin/ringmq" topic create soak-probe --queues 2 --broker "$boot" >/dev/null
kafka_clients & pids+=($!)
churn & pids+=($!)
rss & pids+=($!)
faults & pids+=($!)
for m in $(seq "$minutes"); do
  # It exits non-zero when a send failed (the async producer does not retry
  # through a fail-over); the summary says how many, and whether any was lost.
  "$bin/ringmq-bench" run --broker "$boot" --topic "soak-$m" --rate "$rate" --warmup 1s --duration 60s \
    --drain-timeout 60s --out "$out/minute-$m" >"$out/minute-$m.log" 2>&1 || true
done
touch "$out/done"
# The loops finish their round; the nodes stop last.
sleep 1

OUT="$out" MINUTES="$minutes" python3 - <<'PY'
import datetime, glob, json, os, re
out, minutes = os.environ["OUT"], int(os.environ["MINUTES"])
lost, failed = 0, 0
print("minute  e2e p99 ms  p99.9 ms  msgs/s  send errors  lost")
for m in range(1, minutes + 1):
    try:
        s = json.load(open(f"{out}/minute-{m}/summary.json"))
    except OSError:
        print(f"{m:>6}  (no result: the load generator failed, see minute-{m}.log)")
        failed += 1
        continue
    e = s["e2e"]
    lost += s["lost"]
    row = f"{m:>6}  {e['p99_us'] / 1e3:>10.2f}  {e['p999_us'] / 1e3:>8.2f}  {s['msgs_per_s']:>6.0f}"
    print(f"{row}  {s['errors']:>11}  {s['lost']:>4}")
faults = []
if os.path.exists(f"{out}/faults.tsv"):
    for line in open(f"{out}/faults.tsv"):
        at, back, kind, node = line.split()
        faults.append((float(at), float(back), kind, node))
for at, back, kind, node in faults:
    print(f"fail-over: {kind} of leader {node}: writes taken again after {back - at:.2f} s")
holds, outside = {}, 0.0
stamp = re.compile(r"^(\S+Z) .*was held .*held_ms=([0-9.]+) cause=\"(\w+)\"")
for err in glob.glob(f"{out}/n*/err"):
    for line in open(err, errors="replace"):
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        m = stamp.match(line)
        if not m:
            continue
        t = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
        held, cause = float(m.group(2)), m.group(3)
        n, longest = holds.get(cause, (0, 0.0))
        holds[cause] = (n + 1, max(longest, held))
        # A hold within a fail-over (the fault to 10 s after writes resumed) is the fail-over's.
        if not any(at <= t <= back + 10 for at, back, _, _ in faults):
            outside = max(outside, held)
print("holds by cause: " + (", ".join(f"{c} {n} (longest {l:.0f} ms)" for c, (n, l) in sorted(holds.items())) or "none"))
print(f"longest hold outside fail-overs: {outside:.0f} ms")
rss = {}
if os.path.exists(f"{out}/rss.tsv"):
    for line in open(f"{out}/rss.tsv"):
        fields = line.split()
        # A node being restarted has no RSS to read: "TIME NODE" only.
        if len(fields) == 3 and int(fields[2]):
            _, node, kib = fields
            rss.setdefault(node, []).append(int(kib))
for node, kibs in sorted(rss.items()):
    print(f"RSS {node}: start {kibs[0] / 1024:.0f} MiB, end {kibs[-1] / 1024:.0f} MiB, max {max(kibs) / 1024:.0f} MiB")
rounds = open(f"{out}/kafka.rounds").read().split() if os.path.exists(f"{out}/kafka.rounds") else []
print(f"Kafka client phases: {rounds.count('ok')} passed, {rounds.count('failed')} failed (fail-overs fail some)")
print(f"lost: {lost}; minutes without a result: {failed}")
raise SystemExit(1 if lost or failed else 0)
PY
