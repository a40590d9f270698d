#!/usr/bin/env bash
# Set up recrunner in the active Python environment (a venv, conda env or pyenv version):
#
#   bash install.sh            # recrunner with the test extras (what README's test command needs)
#   bash install.sh search,ray # other extras of pyproject.toml, comma-separated ("" for none)
#   PYTHON=python3.13 bash install.sh
#
# Three steps, because RecBole 1.2.1 cannot be installed the usual way on Python 3.12 or 3.13
# (its ray<=2.6.3 pin has no wheel there):
#   1. torch, unless one is installed: torch==2.13.0 (on Python 3.11 here a local CPU build;
#      elsewhere PyPI's, which brings its CUDA libraries, several GB). TORCH=... picks another.
#   2. RecBole 1.2.1 without its requirements; pyproject.toml lists the packages it imports.
#   3. recrunner itself, editable, with the extras asked for.
set -euo pipefail
cd "$(dirname "$0")"
python=${PYTHON:-python}
extras=${1-test}

if ! "$python" -c 'import sys; sys.exit(not ((3, 10) <= sys.version_info[:2] <= (3, 13)))'; then
    echo "install.sh: recrunner needs Python 3.10 to 3.13; $("$python" --version 2>&1) found (set PYTHON=...)" >&2
    exit 2
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ -n "${TORCH:-}" ] || ! "$python" -c 'import torch' >/dev/null 2>&1; then
    "$python" -m pip install "${TORCH:-torch==2.13.0}"
fi
"$python" -m pip install --no-deps recbole==1.2.1
"$python" -m pip install -e ".${extras:+[$extras]}"
echo "(where pip says that recbole 1.2.1 requires ray<=2.6.3: expected; recrunner's Ray backend uses a current Ray)"
"$python" - <<'EOF'
import platform

import recbole
import recrunner
import torch

print(f"recrunner {recrunner.__version__}: RecBole {recbole.__version__}, torch {torch.__version__}, "
      f"Python {platform.python_version()}")
EOF
