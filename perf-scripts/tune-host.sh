#!/usr/bin/env bash
# Checks what a dedicated ringmq broker host needs and, with --apply, sets it,
# printing each change before making it. Safe by default: without --apply it
# only reports.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $0 [--broker-cores LIST] [--apply]
  --broker-cores LIST  CPUs the broker's shards run on, e.g. 1 or 2-7 (default: the last CPU)
  --apply              make the changes (as root); without it nothing is changed

Checks: locked-memory and open-file limits, kernel.io_uring_disabled, CPU
frequency governor, IRQ affinity (network and other IRQs away from broker
cores), movable kernel threads and unbound workqueues away from broker cores,
transparent huge pages.
USAGE
}

apply=0
cores="$(( $(nproc) - 1 ))"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --broker-cores) cores=$2; shift 2 ;;
    --apply) apply=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
if [[ $apply == 1 && $EUID != 0 ]]; then
  echo "--apply needs root" >&2
  exit 1
fi

# Expands "0,2-4" into "0 2 3 4".
expand() {
  local out=() part
  IFS=',' read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    if [[ $part == *-* ]]; then out+=($(seq "${part%-*}" "${part#*-}")); else out+=("$part"); fi
  done
  echo "${out[@]}"
}
broker=($(expand "$cores"))
all=($(seq 0 $(( $(nproc) - 1 ))))
others=()
for c in "${all[@]}"; do [[ " ${broker[*]} " == *" $c "* ]] || others+=("$c"); done
shards=${#broker[@]}
need_memlock_kb=$(( shards * 10 * 1024 + 1024 ))
changes=0

change() { # description, command...
  local what=$1; shift
  changes=$((changes + 1))
  if [[ $apply == 1 ]]; then
    echo "  apply: $what"
    "$@" || echo "  FAILED: $what" >&2
  else
    echo "  would: $what (run with --apply)"
  fi
}

echo "broker cores: ${broker[*]}; other cores: ${others[*]:-none}"

memlock=$(ulimit -l)
if [[ $memlock == unlimited || $memlock -ge $need_memlock_kb ]]; then
  echo "ok    memlock: $memlock KiB (need $need_memlock_kb KiB for $shards shards)"
else
  echo "fix   memlock: $memlock KiB, need $need_memlock_kb KiB (or CAP_IPC_LOCK)"
  change "write /etc/security/limits.d/90-ringmq.conf with memlock $need_memlock_kb (new sessions; systemd units need LimitMEMLOCK=)" \
    sh -c "printf '* soft memlock $need_memlock_kb\n* hard memlock $need_memlock_kb\n' >> /etc/security/limits.d/90-ringmq.conf"
fi

nofile=$(ulimit -n)
if [[ $nofile -ge 65536 ]]; then
  echo "ok    open files: $nofile"
else
  echo "fix   open files: $nofile, want 65536"
  change "write /etc/security/limits.d/90-ringmq.conf with nofile 65536 (new sessions; systemd units need LimitNOFILE=)" \
    sh -c "printf '* soft nofile 65536\n* hard nofile 65536\n' >> /etc/security/limits.d/90-ringmq.conf"
fi

if [[ -r /proc/sys/kernel/io_uring_disabled ]]; then
  v=$(cat /proc/sys/kernel/io_uring_disabled)
  if [[ $v == 0 ]]; then echo "ok    kernel.io_uring_disabled = 0"; else
    echo "fix   kernel.io_uring_disabled = $v"
    change "sysctl -w kernel.io_uring_disabled=0" sysctl -w kernel.io_uring_disabled=0
  fi
else
  echo "ok    kernel.io_uring_disabled: not present (io_uring not disabled)"
fi

governors=(/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)
if [[ -e ${governors[0]} ]]; then
  for g in "${governors[@]}"; do
    if [[ $(cat "$g") != performance ]]; then
      echo "fix   $(dirname "$(dirname "$g")" | xargs basename) governor: $(cat "$g")"
      change "echo performance > $g" sh -c "echo performance > $g"
    fi
  done
  echo "ok    CPU governors checked"
else
  echo "skip  CPU governor: no cpufreq here (a VM or a fixed-frequency host)"
fi

# IRQs: keep other devices' interrupts off the broker cores. Storage IRQs are
# reported, not moved: the kernel completes Direct I/O on the CPU that takes
# the interrupt, so a disk's IRQ belongs on a broker core, never on a core
# busy with client threads (measured: 100 ms write stalls otherwise).
for irq in /proc/irq/[0-9]*; do
  [[ -r $irq/smp_affinity_list ]] || continue
  n=$(basename "$irq")
  name=$(awk -v n="$n:" '$1 == n { for (i = 5; i <= NF; i++) printf "%s ", $i }' /proc/interrupts | sed 's/ *$//')
  [[ -n $name ]] || continue
  aff=$(cat "$irq/smp_affinity_list")
  hits=0
  for c in $(expand "$aff"); do [[ " ${broker[*]} " == *" $c "* ]] && hits=1; done
  [[ $hits == 1 ]] || continue
  if [[ $name == *virtio*req* || $name == *nvme* || $name == *blk* ]]; then
    echo "note  IRQ $n ($name) on CPUs $aff: storage completions; keep it on a broker core"
  elif [[ ${#others[@]} -gt 0 && $aff != "$(IFS=,; echo "${others[*]}")" ]]; then
    echo "fix   IRQ $n ($name) on CPUs $aff overlaps broker cores"
    change "echo $(IFS=,; echo "${others[*]}") > $irq/smp_affinity_list" sh -c "echo $(IFS=,; echo "${others[*]}") > $irq/smp_affinity_list"
  fi
done

# Kernel threads that may run on any CPU (kdamond, kswapd, kcompactd, rcu, ...)
# and unbound workqueues: on a broker core they preempt its shard (measured:
# kdamond.0 ran 4.2 ms at a time on the broker core of a 2-CPU VM). Per-CPU
# kernel threads cannot move and are left alone; IRQ threads follow their IRQ.
movable=()
for d in /proc/[0-9]*; do
  flags=$(awk '{print $9}' "$d/stat" 2>/dev/null) || continue
  # PF_KTHREAD set, PF_NO_SETAFFINITY clear.
  [[ -n $flags ]] && (( (flags & 0x200000) && !(flags & 0x4000000) )) || continue
  comm=$(cat "$d/comm" 2>/dev/null) || continue
  [[ $comm == irq/* ]] && continue
  allowed=$(awk '/^Cpus_allowed_list/ { print $2 }' "$d/status" 2>/dev/null) || continue
  for c in $(expand "$allowed"); do
    if [[ " ${broker[*]} " == *" $c "* ]]; then movable+=("$(basename "$d")"); break; fi
  done
done
move_kthreads() { # cpus, pids...
  local cpus=$1 pid; shift
  for pid in "$@"; do taskset -pc "$cpus" "$pid" >/dev/null 2>&1 || echo "  could not move kernel thread $pid" >&2; done
}
if [[ ${#others[@]} == 0 ]]; then
  echo "skip  kernel threads: every CPU is a broker core"
elif [[ ${#movable[@]} -gt 0 ]]; then
  target=$(IFS=,; echo "${others[*]}")
  names=$(for p in "${movable[@]:0:6}"; do cat "/proc/$p/comm" 2>/dev/null; done | paste -sd, -)
  echo "fix   ${#movable[@]} kernel threads may run on broker cores (${names}...)"
  change "taskset -pc $target for each of them (kthreadd's children inherit it)" move_kthreads "$target" "${movable[@]}"
else
  echo "ok    movable kernel threads stay off broker cores"
fi
wq=/sys/devices/virtual/workqueue/cpumask
if [[ ${#others[@]} -gt 0 && -w $wq ]]; then
  mask=0
  for c in "${others[@]}"; do mask=$(( mask | (1 << c) )); done
  want=$(printf '%x' "$mask")
  if [[ $(( 16#$(tr -d ',' <"$wq") )) != "$mask" ]]; then
    echo "fix   unbound workqueues may run on CPUs mask $(cat "$wq")"
    change "echo $want > $wq" sh -c "echo $want > $wq"
  else
    echo "ok    unbound workqueues: CPUs mask $want"
  fi
fi

thp=/sys/kernel/mm/transparent_hugepage/enabled
if [[ -r $thp ]]; then
  current=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$thp")
  if [[ $current == always ]]; then
    echo "fix   transparent huge pages: always (compaction stalls hurt tail latency)"
    change "echo madvise > $thp" sh -c "echo madvise > $thp"
  else
    echo "ok    transparent huge pages: $current"
  fi
fi

if [[ $changes == 0 ]]; then echo "nothing to change"; elif [[ $apply == 0 ]]; then echo "$changes change(s) suggested; rerun with --apply to make them"; fi
