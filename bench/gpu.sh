#!/usr/bin/env bash
# One device at the paper's settings: a STIR pair's wall time and memory, training images/s.
#   bash bench/gpu.sh            # ResNet18 width 64, n=1000, k=5, 1000 faithful steps (issue 12: < 60 s on one H200)
#                                # + train.py's steps: paper / fast recipe, DataLoader / device-resident data, AT
#   bash bench/gpu.sh --smoke    # tiny sizes, any machine: checks the script end to end
# PYTHON: the interpreter (default: python on PATH), e.g. PYTHON=.venv/bin/python bash bench/gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"${PYTHON:-python}" bench/bench_gpu.py "$@"
"${PYTHON:-python}" bench/bench_train.py device "$@"
