#!/usr/bin/env bash
# The GPU suite in one command (bench/gpu_suite.py says what it runs):
#   bash bench/gpu_suite.sh [--quick] [--dry-run] [--out DIR] [--only ROW ...]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" bench/gpu_suite.py "$@"
