# shellcheck shell=bash
# Sourced by the other scripts: make ./.venv with sqew and the extras in SQEW_EXTRAS installed
# (comma-separated, e.g. "test"; empty = sqew alone; unset = "test").
# Safe to run again: it reinstalls only when pyproject.toml changed since the last install of
# the same extras (a stamp per extras set).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON="${SQEW_PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
# `-` not `:-`: an empty SQEW_EXTRAS means no extras (scripts/serve), not the default.
EXTRAS="${SQEW_EXTRAS-test}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV with $("$PYTHON" --version)" >&2
    "$PYTHON" -m venv "$VENV"
fi

if [ -n "$EXTRAS" ]; then
    REQUIREMENT="$ROOT[$EXTRAS]"
    STAMP="$VENV/.sqew-installed-$EXTRAS"
else
    REQUIREMENT="$ROOT"
    STAMP="$VENV/.sqew-installed"
fi
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ]; then
    echo "setup: installing sqew${EXTRAS:+[$EXTRAS]} into $VENV" >&2
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e "$REQUIREMENT"
    touch "$STAMP"
fi
# sqew is installed editable: Python imports its modules from this checkout, and where it may
# not write their bytecode (PYTHONDONTWRITEBYTECODE set, as on some CI machines) every process
# would compile each module again: a third of a CLI command's time. Compile them once here;
# later runs compile only what changed.
"$VENV/bin/python" -m compileall -qq -j 0 "$ROOT/sqew" "$ROOT/alembic" || true  # (errors: said by what runs)
export PATH="$VENV/bin:$PATH"
