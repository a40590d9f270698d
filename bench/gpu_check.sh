#!/usr/bin/env bash
# The project's GPU check (bench/gpu_check.py) on a machine that has torch but perhaps not RecBole,
# and perhaps pandas 3 (../shared/GPU.md: such offline GPU nodes are common):
#
#   bash bench/gpu_check.sh WHEELS_DIR [gpu_check.py's flags]
#
# WHEELS_DIR holds wheels for this machine's Python: pandas<3, recbole 1.2.1, colorlog, thop,
# texttable, pytz, tzdata (built elsewhere with `pip download`). They go into a private folder put
# ahead of the installed packages; nothing is installed into the machine's Python. Results go to
# $OUT (the device tool's folder) or ./gpu-check, packed as gpu-check.tar.gz beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=${1:?usage: bash bench/gpu_check.sh WHEELS_DIR [flags]}
shift
out=${OUT:-$PWD/gpu-check}
mkdir -p "$out"
site=$(mktemp -d)/site
started=$SECONDS
python -m pip install --quiet --no-index --no-deps --target "$site" "$wheels"/*.whl
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
echo "set-up: $((SECONDS - started)) s (wheels into $site)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
python bench/gpu_check.py --out "$out/check" "$@" 2>&1 | tee "$out/gpu_check.txt"
tar -czf "$out/gpu-check.tar.gz" -C "$out" check
cp "$out/check/gpu_check.md" "$out/gpu_check.md"
