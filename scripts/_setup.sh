# shellcheck shell=bash
# Sourced by the other scripts: make ./.venv with sqew and its extras installed.
# Safe to run again: it reinstalls only when pyproject.toml changed since the last install.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON="${SQEW_PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
EXTRAS="${SQEW_EXTRAS:-test}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV with $("$PYTHON" --version)" >&2
    "$PYTHON" -m venv "$VENV"
fi

STAMP="$VENV/.sqew-installed-$EXTRAS"
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ]; then
    echo "setup: installing sqew[$EXTRAS] into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e "$ROOT[$EXTRAS]"
    touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
