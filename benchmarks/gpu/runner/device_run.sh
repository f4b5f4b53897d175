#!/bin/sh
# Everything the GPU machine has to do, in one call, within a time limit:
#   sh device_run.sh OUT_DIR [SECONDS]        (SECONDS: the whole run's limit, default 290)
# writes OUT_DIR/run.log (device, versions, the self-test, the table) and OUT_DIR/results.csv
# (one row per kernel and problem, written as each is measured: a run cut short keeps its rows).
# The self-test runs first (60 s at most); the timed run gets what is left, less 10 s.
# PYTHON=... picks the interpreter (default python3); extra run.py arguments go in RUN_ARGS.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: sh device_run.sh OUT_DIR [SECONDS]}
LIMIT=${2:-290}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
START=$(date +%s)
{
  echo "== device_run.sh $(date -u +%Y-%m-%dT%H:%M:%SZ), limit ${LIMIT} s"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
  "$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
  echo "== selftest-cpu"
  timeout -k 5 60 "$PY" "$HERE/run.py" --selftest-cpu
  echo "selftest exit $?"
  LEFT=$((LIMIT - ($(date +%s) - START) - 10))
  echo "== run (${LEFT} s at most)"
  # shellcheck disable=SC2086  # RUN_ARGS is a list of arguments
  timeout -k 5 "$LEFT" "$PY" "$HERE/run.py" --csv "$OUT/results.csv" ${RUN_ARGS:-}
  echo "run exit $? (124: cut at the time limit; the CSV holds the rows measured)"
} 2>&1 | tee "$OUT/run.log"
