#!/usr/bin/env bash
# The wgmma family on this GPU (sm_90 only: H100, H200), in one call of about ten minutes. Install first, as for
# scripts/gpu_run.sh, then on the GPU machine:
#
#   bash scripts/gpu_wgmma.sh
#
# It builds the Wg kernels (WgLarge, sm_90a) with CUTLASS's sm_90 TF32 GEMM beside them, and the TF32 family's
# TcTallAsync and TcHuge with CUTLASS's 3xTF32 SGEMM; checks every wgmma implementation (verify: odd shapes take the
# scalar kernels, aligned ones TMA); times them at n = 4,096, 8,192 and 16,384 beside cuBLAS SGEMM, cuBLAS TF32,
# CUTLASS's TF32 sm_90 GEMM and 3xTF32 SGEMM, all alike on the same warm GPU (the runner's method and stopping rule,
# clocks and power per sample); writes the accuracy table and the 3xTF32 bias at k = 8 to 4,096. Everything goes
# into data/<gpu>/ (square_wgmma.csv, verify_wgmma.txt, accuracy_wgmma.csv, 3xtf32_bias_wgmma.txt,
# resources_sm_90.csv, system.json, gpu_wgmma.txt), ready to commit.
#
# Each step runs to its end or its time limit (STEP_LIMIT seconds); a failed step does not stop the ones after it.
# Environment: PYTHON (default .venv/bin/python if present, else python3), SIZES (default 4096,8192,16384),
# MAX_TIME (seconds per point, default 3), STEP_LIMIT (default 900), DATA (default data), BUILD (default build).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
SIZES=${SIZES:-4096,8192,16384}
MAX_TIME=${MAX_TIME:-3}
STEP_LIMIT=${STEP_LIMIT:-900}
BUILD=${BUILD:-build}

source scripts/step.sh  # gpu_setup, and step NAME COMMAND...: run it bounded, log its status and seconds, carry on
gpu_setup gpu_wgmma sm_90 "wgmma needs an sm_90 GPU (H100, H200)"

WG=gemm-tf32-wgmma,strassen1-tf32-wgmma,gemm-3xtf32-wgmma,strassen1-3xtf32-wgmma,strassen2-3xtf32-wgmma
step build $PY -m strassenbench build --arch sm_90 --dtype float32 --strategy WgLarge --strategy TcTallAsync \
  --strategy TcHuge --strategy Huge --out "$BUILD"
[ -f "$BUILD/resources.csv" ] && cp "$BUILD/resources.csv" "$DATA/resources_sm_90.csv"
step sysinfo $PY -m strassenbench sysinfo --engine cuda --out "$DATA/system.json"
# Each implementation as it runs by default (the register write-back), then the Strassen ones in the atomic scheme
# (the TMA tile reductions into C, registers at the fringes).
step verify bash -c 'py=$3 build=$4; v() { "$py" -m strassenbench verify --engine cuda --build-dir "$build" \
  --shape 1023x1021x1027 --shape 4096x4096x4096 --beta 0.5 "$@"; }; { for impl in ${1//,/ }; do v --impl "$impl" || exit 1; done
  for impl in ${2//,/ }; do v --impl "$impl" --scheme atomic || exit 1; done; } > "$5" 2>&1; rc=$?; cat "$5"
  exit $rc' verify "$WG,cutlass-tf32-sm90" "strassen1-tf32-wgmma,strassen1-3xtf32-wgmma,strassen2-3xtf32-wgmma" \
  "$PY" "$BUILD" "$DATA/verify_wgmma.txt"
IMPLS=cublas,cublas-tf32,gemm-3xtf32,$WG
for lib in cutlasstf32sm90:cutlass-tf32-sm90 cutlass3xtf32:cutlass-3xtf32; do  # the CUTLASS baselines need nvcc
  [ -f "$BUILD/libsb_${lib%%:*}_sm_90.so" ] && IMPLS=$IMPLS,${lib#*:}
done
# --strategy Huge: each family's counterpart of the 128 x 128 tile (WgLarge, TcHuge; strassenbench.families)
step square $PY -m strassenbench bench --engine cuda --build-dir "$BUILD" --sweep square --sizes "$SIZES" \
  --impl "$IMPLS" --strategy Huge --scheme atomic --max-time "$MAX_TIME" --no-progress --out "$DATA/square_wgmma.csv"
step accuracy $PY -m strassenbench accuracy --engine cuda --build-dir "$BUILD" --sizes 1024,4096 --no-progress \
  --impl "cublas,cublas-tf32,gemm-3xtf32,$WG$([ -f "$BUILD/libsb_cutlass3xtf32_sm_90.so" ] && echo ,cutlass-3xtf32)" \
  --out "$DATA/accuracy_wgmma.csv"
step bias bash -c '"$1" scripts/tf32_bias.py cuda > "$2" 2>&1; rc=$?; cat "$2"; exit $rc' bias "$PY" \
  "$DATA/3xtf32_bias_wgmma.txt"
if [ -f "$DATA/square_wgmma.csv" ]; then
  $PY - "$DATA" <<'EOF'
import sys
from strassenbench.results import read_results
frame = read_results(f"{sys.argv[1]}/square_wgmma.csv", "bench")
print(frame.pivot_table(index="x", columns="impl", values="tflops").round(2).to_string())
EOF
fi
echo "== done: $DATA"
cat "$SUMMARY"
exit "$failed"
