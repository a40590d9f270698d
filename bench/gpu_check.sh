#!/usr/bin/env bash
# The project's GPU check (bench/gpu_check.py) on a machine that has torch but perhaps not RecBole,
# and perhaps pandas 3 (../shared/GPU.md: such offline GPU nodes are common):
#
#   bash bench/gpu_check.sh WHEELS_DIR [gpu_check.py's flags]
#
# WHEELS_DIR holds wheels for this machine's Python: pandas<3, recbole 1.2.1, colorlog, thop,
# texttable, pytz, tzdata (built elsewhere with `pip download`). They go into a private folder put
# ahead of the installed packages; nothing is installed into the machine's Python. The check works in
# a temporary folder; into $OUT (the device tool's folder) or ./gpu-check go three files, also when
# it stops early: gpu_check.md (the table), gpu_check.txt (its output), gpu-check.tar.gz (the steps'
# results and logs, the runs without their checkpoints). Give it `--budget SECONDS` to end in time.
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=${1:?usage: bash bench/gpu_check.sh WHEELS_DIR [flags]}
shift
out=${OUT:-$PWD/gpu-check}
mkdir -p "$out"
py=${PYTHON:-python3}  # the image's python3 holds torch
site=$(mktemp -d)/site
started=$SECONDS
"$py" -m pip install --quiet --no-index --no-deps --target "$site" "$wheels"/*.whl
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
echo "set-up: $((SECONDS - started)) s (wheels into $site)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
work=$(mktemp -d)/check
PYTHONUNBUFFERED=1 "$py" bench/gpu_check.py --out "$work" "$@" 2>&1 | tee "$out/gpu_check.txt" || true
tar -czf "$out/gpu-check.tar.gz" --exclude='*.pth' --exclude='.cache' -C "$(dirname "$work")" check
cp "$work/gpu_check.md" "$out/gpu_check.md" 2>/dev/null || echo "no table: see gpu_check.txt"
