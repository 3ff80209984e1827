#!/usr/bin/env bash
# The README's main command on this GPU, in one sitting, and a repeat of its square sweep: what a GPU machine's
# user runs first. Install first, where the network is (as for scripts/gpu_run.sh), then on the GPU machine:
#
#   bash scripts/gpu_main.sh
#
# 1. `snakemake --cores 1 --config profile=quick` (the quick profile: the square sweep through the crossover
#    region, short rank-k and panel sweeps, the strategies, verify, memory limits, accuracy, model and report;
#    the paper profile's predicted wall time is in README.md), its log kept as data/<gpu>/snakemake.log.
# 2. The square sweep measured again on the same warm machine (its parts removed from results/, the collect step
#    rerun), and `strassenbench compare` of the two runs into data/<gpu>/compare_repeat/ (SAME expected: one GPU,
#    one commit, one build).
#
# Environment: PYTHON (default .venv/bin/python if present, else python3), PROFILE (default quick),
# STEP_LIMIT (seconds per step, default 1800).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
PROFILE=${PROFILE:-quick}
STEP_LIMIT=${STEP_LIMIT:-1800}
BIN=$(dirname "$PY")
export PATH="$BIN:$PATH"

$PY -m strassenbench doctor || exit 2
SLUG=$($PY -c "from strassenbench.device import slug, visible_gpus; print(slug(visible_gpus()[0]))") || exit 2
DATA=data/$SLUG
mkdir -p "$DATA" || exit 2
FIRST=$(mktemp -d)
trap 'rm -rf "$FIRST"' EXIT

echo "== main command: snakemake --cores 1 --config profile=$PROFILE"
start=$SECONDS
timeout --kill-after=10 "$STEP_LIMIT" snakemake --cores 1 --config "profile=$PROFILE" > "$FIRST/snakemake.log" 2>&1
rc=$?
echo "rc=$rc after $((SECONDS - start)) s" >> "$FIRST/snakemake.log"
cp "$FIRST/snakemake.log" "$DATA/snakemake.log"
tail -5 "$DATA/snakemake.log"
[ "$rc" = 0 ] || exit "$rc"

echo "== the square sweep again, and compare"
cp -r "$DATA" "$FIRST/run1"
rm -rf "results/$SLUG/sweep/square" "results/$SLUG/parts/square"
timeout --kill-after=10 "$STEP_LIMIT" snakemake --cores 1 --config "profile=$PROFILE" "$DATA/square.csv" \
  > "$FIRST/repeat.log" 2>&1 || { tail -20 "$FIRST/repeat.log"; exit 1; }
$PY -m strassenbench compare "$FIRST/run1" "$DATA" --out "$DATA/compare_repeat"
echo "== done: $DATA"
