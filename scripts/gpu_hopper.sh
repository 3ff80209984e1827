#!/usr/bin/env bash
# Whether the fused kernels reach what Hopper allows (H100, H200: sm_90), in one call: about six minutes of sweeps
# by the H200's earlier time per point (an estimate), the build made beforehand.
# Install first, as for scripts/gpu_run.sh; build beforehand where nvcc is (a login node, a CPU machine with the
# same toolchain: the build folder is reused, only what is not fresh there is compiled), then on the GPU machine:
#
#   bash scripts/gpu_hopper.sh
#
# ROUNDS rounds (default 3), each into files of its own, timed alike on the same warm GPU (the runner's method and
# stopping rule, clocks and power per sample), the implementations' order shuffled anew each round:
#   - hopper_r<i>.csv: a square sweep at SIZES of cuBLAS SGEMM, our GEMM, fused 1-level and 2-level direct
#     Strassen (atomic scheme), and the presum scheme's 1- and 2-level, on the Huge tile;
#   - hopper_splitk_r<i>.csv: the split-k scheme's GEMM and 1-level at the same sizes (k in the parts the model
#     picks per size; split_k says which);
#   - hopper_tc_r<i>.csv: 3xTF32 at BIG, our GEMM on every tensor-core strategy (the fastest kept, its name
#     recorded) against CUTLASS's 3xTF32 SGEMM;
#   - hopper_dmma_r<i>.csv: float64 at BIG, cuBLAS DGEMM against our DMMA GEMM and 1-level.
# Then the accuracy of the 3xTF32 and DMMA implementations (hopper_accuracy.csv), and a table of each figure's
# median over the rounds, its spread, and the ratios the Hopper goals are stated in. Everything goes into
# data/<gpu>/hopper/ (with its system.json and resources_sm_90.csv, the build's table of what it ran), a folder of
# its own so that these shorter timings join neither compare's noise floor nor pick's measured points of
# data/<gpu>/; gpu_hopper.txt (a line per step) into data/<gpu>/. Ready to commit. The sweeps resume: measuring
# again from the start takes another DATA (or the files moved away).
#
# Each step runs to its end or its time limit (STEP_LIMIT seconds); a failed step does not stop the ones after it,
# and a rerun resumes the sweeps where they stopped. Environment: PYTHON (default .venv/bin/python if present, else
# python3), SIZES (default 1536,2048,3072,4096,8192,16384), BIG (the size of the 3xTF32 and float64 comparisons,
# default 8192), ACCURACY_SIZES (default 1024,4096), ROUNDS (default 3), MAX_TIME (seconds per point, default 1),
# STEP_LIMIT (default 600), DATA (default data), BUILD (default build).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
SIZES=${SIZES:-1536,2048,3072,4096,8192,16384}
BIG=${BIG:-8192}
ACCURACY_SIZES=${ACCURACY_SIZES:-1024,4096}
ROUNDS=${ROUNDS:-3}
MAX_TIME=${MAX_TIME:-1}
STEP_LIMIT=${STEP_LIMIT:-600}
BUILD=${BUILD:-build}
case $ROUNDS in
  [1-9]) ;;
  *) echo "gpu_hopper.sh: ROUNDS must be 1 to 9, not '$ROUNDS'" >&2; exit 2 ;;
esac

source scripts/step.sh  # gpu_setup, and step NAME COMMAND...: run it bounded, log its status and seconds, carry on
gpu_setup gpu_hopper sm_90 "this measures Hopper (sm_90: H100, H200)"
echo "== $SLUG: build into $BUILD, $ROUNDS rounds at $SIZES, results in $DATA"

# The implementations of each file (tests/gpu/test_gpu_setup.py checks every name against the registry).
SIMT=cublas,gemm,strassen1,strassen2-direct,strassen1-presum,strassen2-presum
SPLITK=gemm,strassen1
TC=gemm-3xtf32
DMMA=cublas,gemm-dmma,strassen1-dmma
ACCURACY=cublas,gemm-3xtf32,strassen1-3xtf32,gemm-dmma,strassen1-dmma

# What the sweeps run and no more (the whole default build is some 700 kernels): the tensor-core GEMM and 1-level
# kernels of every strategy `--strategy best` may time, the DMMA ones, then the SIMT Huge float32 kernels of 1- and
# 2-level Strassen and the presum scheme (last: resources.csv is the last build's); each with its CUTLASS baseline.
FEW=(--counts 1x1x1 --plan strassen:1)
step build_tc $PY -m strassenbench build --arch sm_90 --dtype float32 --strategy TcSmall --strategy TcLarge \
  --strategy TcTall --strategy TcTallAsync --strategy TcHuge "${FEW[@]}" --out "$BUILD"
step build_dmma $PY -m strassenbench build --arch sm_90 --dtype float64 --strategy DmmaLarge --strategy DmmaHuge \
  "${FEW[@]}" --out "$BUILD"
step build $PY -m strassenbench build --arch sm_90 --dtype float32 --strategy Huge --presum --out "$BUILD"
OUT=$DATA/hopper
mkdir -p "$OUT" || exit 2
[ -f "$BUILD/resources.csv" ] && cp "$BUILD/resources.csv" "$OUT/resources_sm_90.csv"
if [ -f "$BUILD/libsb_cutlass3xtf32_sm_90.so" ]; then  # the CUTLASS baselines need nvcc
  TC=$TC,cutlass-3xtf32
  ACCURACY=$ACCURACY,cutlass-3xtf32
fi
step sysinfo $PY -m strassenbench sysinfo --engine cuda --out "$OUT/system.json"

bench() {  # bench NAME FILE IMPLS ROUND ARGS...: one round's sweep, its order seeded by the round
  local name=$1 file=$2 impls=$3 round=$4
  shift 4
  step "$name" $PY -m strassenbench bench --engine cuda --build-dir "$BUILD" --sweep square --impl "$impls" \
    --order-seed "$round" --max-time "$MAX_TIME" --no-progress --out "$OUT/$file" "$@"
}
for round in $(seq 1 "$ROUNDS"); do
  bench "simt$round" "hopper_r$round.csv" "$SIMT" "$round" --sizes "$SIZES" --strategy Huge --scheme atomic
  bench "splitk$round" "hopper_splitk_r$round.csv" "$SPLITK" "$round" --sizes "$SIZES" --strategy Huge \
    --scheme splitk
  bench "tc$round" "hopper_tc_r$round.csv" "$TC" "$round" --sizes "$BIG" --strategy best
  bench "dmma$round" "hopper_dmma_r$round.csv" "$DMMA" "$round" --sizes "$BIG" --dtype float64 --strategy Huge \
    --scheme atomic
done
step accuracy $PY -m strassenbench accuracy --engine cuda --build-dir "$BUILD" --sizes "$ACCURACY_SIZES" \
  --no-progress --impl "$ACCURACY" --dtype float32 --dtype float64 --out "$OUT/hopper_accuracy.csv"

$PY - "$OUT" "$ROUNDS" <<'EOF'
import os
import sys

import pandas as pd

from strassenbench.results import read_results

from strassenbench.results import ResultsError

data, rounds = sys.argv[1], range(1, int(sys.argv[2]) + 1)  # this run's rounds, not files an earlier one left
kinds = {"simt": "hopper_r", "splitk": "hopper_splitk_r", "tc": "hopper_tc_r", "dmma": "hopper_dmma_r"}
files = [(kind, f"{data}/{prefix}{r}.csv") for kind, prefix in kinds.items() for r in rounds]
try:
    frames = [read_results(f, "bench").assign(sweep=kind) for kind, f in files if os.path.exists(f)]
except ResultsError as err:
    sys.exit(f"gpu_hopper.sh: {err}")
if not frames or not any((f["status"] == "ok").any() for f in frames):
    sys.exit("gpu_hopper.sh: no point was measured")
frame = pd.concat(frames)
frame = frame[frame["status"] == "ok"]
by = frame.groupby(["sweep", "dtype", "x", "impl"])["tflops"]
table = pd.DataFrame({"median": by.median(), "spread": (by.max() - by.min()) / by.median(), "rounds": by.size()})
pd.set_option("display.width", 200)
for (sweep, dtype), part in table.reset_index().groupby(["sweep", "dtype"]):
    print(f"{sweep}, {dtype}: TFLOPS, the median over the rounds (largest spread {part['spread'].max():.1%}, "
          f"{part['rounds'].min()} to {part['rounds'].max()} rounds a figure)")
    print(part.pivot_table(index="x", columns="impl", values="median").round(2).to_string())
medians = table["median"].unstack("impl")
# the ratios the Hopper goals are stated in, each within one sweep (timed alike)
for sweep, num, den in [("simt", "strassen1", "gemm"), ("splitk", "strassen1", "gemm"), ("simt", "strassen1", "cublas"),
                        ("simt", "strassen1-presum", "cublas"), ("simt", "strassen2-direct", "cublas"),
                        ("simt", "strassen2-presum", "cublas"), ("tc", "gemm-3xtf32", "cutlass-3xtf32"),
                        ("dmma", "strassen1-dmma", "cublas")]:
    if sweep in medians.index.get_level_values("sweep") and {num, den} <= set(medians.columns):
        part = medians.loc[sweep]
        print(f"{sweep}: {num} / {den}:", (part[num] / part[den]).dropna().round(3).droplevel("dtype").to_dict())
EOF
[ $? = 0 ] || failed=1
echo "== done: $OUT"
cat "$SUMMARY"
exit "$failed"
