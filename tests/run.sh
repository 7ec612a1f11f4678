#!/usr/bin/env bash
# README command 2: installs what the tests need and runs them all.
# Every line of tests/prerequisites.txt that is missing is installed (apt and
# pip, as root), printing what it installs; then `cargo test --workspace`
# runs, with any further arguments passed on (e.g. `tests/run.sh --test kafka`).
# Exit 2 when a prerequisite cannot be installed here.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f "$HOME/.cargo/env" ]] && source "$HOME/.cargo/env"

PYTHON=/usr/bin/python3
cannot() { echo "tests/run.sh: $*" >&2; exit 2; }

present() { # kind name
  case "$1" in
    cmd) command -v "$2" >/dev/null 2>&1 ;;
    py) [[ -x $PYTHON ]] && "$PYTHON" -c "import $2" >/dev/null 2>&1 ;;
    *) cannot "unknown kind '$1' in tests/prerequisites.txt" ;;
  esac
}

# The list's lines, without its comments and blank lines.
prerequisites() { grep -v -e '^#' -e '^[[:space:]]*$' tests/prerequisites.txt; }

apt_missing=() pip_missing=()
while read -r kind name source package _; do
  present "$kind" "$name" && continue
  case "$source" in
    apt) apt_missing+=("$package") ;;
    pip) pip_missing+=("$package") ;;
    *) cannot "unknown source '$source' for $name in tests/prerequisites.txt" ;;
  esac
done < <(prerequisites)
# pip installs into Debian's Python, with Debian's pip.
if ((${#pip_missing[@]})) && ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
  apt_missing+=(python3-pip)
fi

if ((${#apt_missing[@]} + ${#pip_missing[@]})); then
  [[ $(id -u) == 0 ]] || cannot "missing ${apt_missing[*]} ${pip_missing[*]}: run as root to install them, or install them yourself"
fi
if ((${#apt_missing[@]})); then
  command -v apt-get >/dev/null || cannot "missing ${apt_missing[*]} and no apt-get here: install them yourself (Debian package names)"
  # Deduplicated: several lines can come from one package.
  mapfile -t apt_missing < <(printf '%s\n' "${apt_missing[@]}" | sort -u)
  echo "== installing (apt): ${apt_missing[*]}"
  apt-get update -qq >/dev/null || cannot "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_missing[@]}" >/dev/null \
    || cannot "apt-get install ${apt_missing[*]} failed"
fi
if ((${#pip_missing[@]})); then
  echo "== installing (pip, $PYTHON): ${pip_missing[*]}"
  "$PYTHON" -m pip install -q --root-user-action=ignore --break-system-packages "${pip_missing[@]}" \
    || cannot "pip install ${pip_missing[*]} failed"
fi

# Installed is not always usable (a package that names its command otherwise): check again.
while read -r kind name _; do
  present "$kind" "$name" || cannot "$kind $name is still missing after the install"
done < <(prerequisites)

echo "== cargo test --workspace $*"
exec cargo test --workspace "$@"
