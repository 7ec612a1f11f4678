# Sourced by the perf scripts: checks for the tools they run.

# Installs fio from Debian's packages if it is missing.
need_fio() {
  if ! command -v fio >/dev/null; then
    echo "fio not found; installing it from Debian's packages" >&2
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio >/dev/null
  fi
}

# Stops with what to install if perf is missing.
need_perf() {
  if ! command -v perf >/dev/null; then
    echo "perf not found: install it (Debian: apt-get install linux-perf) and rerun" >&2
    exit 1
  fi
}
