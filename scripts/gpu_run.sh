#!/usr/bin/env bash
# Measure this GPU, offline, in one call. Install first, where the network is (the GPU machine needs none):
#
#   python3 -m venv .venv && .venv/bin/pip install -e '.[gpu,test]'       # the driver runs CUDA 13
#   python3 -m venv .venv && .venv/bin/pip install -e '.[gpu-cu12,test]'  # the driver runs CUDA 12 (V100 too)
#
# then, on the GPU machine:
#
#   bash scripts/gpu_run.sh
#
# It checks the set-up first (`strassenbench doctor`: GPU, driver against CuPy's CUDA, libraries, the build
# the GPU runs and the toolchain for this driver) and stops with the fix if something is wrong. Then it builds
# the kernels for this GPU (a folder built beforehand with the same toolchain, e.g. on a login node, is reused:
# only what is not fresh there is compiled), writes the system description, times a square sweep of every
# implementation, runs the gpu tests on the same build, and writes the memory limits, all into data/<gpu>/ ready
# to commit. On sm_80 and later it also builds the tensor-core kernels (TcHuge for the sweeps, TcSmall for the
# gpu tests, and CUTLASS's 3xTF32 SGEMM), times them in the same sweep and writes the accuracy table (accuracy.csv,
# float32 and float64); it builds the FP64 tensor-core kernels (DmmaSmall, DmmaLarge, DmmaHuge, CUTLASS's DMMA
# DGEMM) too, which the gpu tests and the accuracy table run, and times them in float64 into the same square.csv
# beside cuBLAS's DGEMM and our SIMT GEMM (timed alike: by graph where the float32 rows were).
#
# Each step runs to its end or its time limit (STEP_LIMIT seconds), and a failed step does not stop the ones
# after it: the run ends with one line per step (status, seconds) in data/<gpu>/gpu_run.txt, and exits non-zero
# when any step failed. A rerun resumes the sweeps where they stopped.
#
# Environment: PYTHON (default .venv/bin/python if present, else python3), SIZES (default
# 1024,1536,2048,2560,3072,3584,4096,8192: the crossover region, where wave quantization decides),
# MAX_TIME (seconds per point, default 3), MEMORY_BUDGET (memlimit's, default 16GiB), STEP_LIMIT (seconds per step,
# default 1800), DATA (default data), BUILD (default build).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
SIZES=${SIZES:-1024,1536,2048,2560,3072,3584,4096,8192}
MAX_TIME=${MAX_TIME:-3}
STEP_LIMIT=${STEP_LIMIT:-1800}
BUILD=${BUILD:-build}
MEMORY_BUDGET=${MEMORY_BUDGET:-16GiB}  # memlimit's: the paper's 16 GB V100, so that every GPU's limits compare

source scripts/step.sh  # gpu_setup, and step NAME COMMAND...: run it bounded, log its status and seconds, carry on
gpu_setup gpu_run
echo "== $SLUG: build $ARCH into $BUILD, results in $DATA"

# Tensor cores, sm_80 and later: TcHuge for the sweeps, TcTall (two blocks per SM) and TcTallAsync (its multistage
# cp.async main loop) beside it, TcSmall for the gpu tests; the FP64 ones' DmmaSmall and
# DmmaHuge (float64) for the gpu tests and resources.csv, DmmaLarge (their default on a GPU) for the accuracy table
TENSOR=()
if [ "${ARCH#sm_}" -ge 80 ]; then
  TENSOR=(--strategy TcSmall --strategy TcTall --strategy TcTallAsync --strategy TcHuge --strategy DmmaSmall --strategy DmmaLarge
          --strategy DmmaHuge)
fi
step build $PY -m strassenbench build --arch "$ARCH" --dtype float32 --dtype float64 --strategy Small \
  --strategy Medium --strategy Large --strategy Tall --strategy Wide --strategy Huge "${TENSOR[@]}" \
  --plan classical222-8-24x1:1 --out "$BUILD"
[ -f "$BUILD/resources.csv" ] && cp "$BUILD/resources.csv" "$DATA/resources_$ARCH.csv"

# classical222-8-24x1: the control (the fused machinery with one term per operand, 8 products, atomic scheme)
IMPLS=cublas,gemm,strassen1,strassen1-ref,strassen2-hybrid,strassen2-ref,strassen2-direct,classical222-8-24x1
[ -f "$BUILD/libsb_cutlass_$ARCH.so" ] && IMPLS=$IMPLS,cutlass  # the CUTLASS baseline needs nvcc
if [ ${#TENSOR[@]} -gt 0 ]; then
  IMPLS=$IMPLS,cublas-tf32,gemm-tf32,gemm-3xtf32,strassen1-tf32,strassen1-3xtf32,strassen2-3xtf32
  [ -f "$BUILD/libsb_cutlass3xtf32_$ARCH.so" ] && IMPLS=$IMPLS,cutlass-3xtf32
fi

step sysinfo $PY -m strassenbench sysinfo --engine cuda --out "$DATA/system.json"
step square $PY -m strassenbench bench --engine cuda --build-dir "$BUILD" --sweep square --sizes "$SIZES" \
  --impl "$IMPLS" --strategy Huge --scheme atomic --max-time "$MAX_TIME" --no-progress --out "$DATA/square.csv"
# the splitk scheme beside it (each product's k in the parts the model picks per size; split_k says which), in a
# file of its own: the A/B against the atomic scheme's rows of square.csv, timed alike on the same warm GPU
step splitk $PY -m strassenbench bench --engine cuda --build-dir "$BUILD" --sweep square --sizes "$SIZES" \
  --impl gemm,strassen1,strassen2-direct --strategy Huge --scheme splitk --max-time "$MAX_TIME" --no-progress \
  --out "$DATA/square_splitk.csv"
if [ ${#TENSOR[@]} -gt 0 ]; then  # every tensor-core strategy timed (best: the fastest kept, its name recorded)
  TC=gemm-3xtf32,strassen1-3xtf32  # against CUTLASS's 3xTF32 SGEMM, alike on the same warm GPU
  [ -f "$BUILD/libsb_cutlass3xtf32_$ARCH.so" ] && TC=$TC,cutlass-3xtf32
  step tcstrategies $PY -m strassenbench bench --engine cuda --build-dir "$BUILD" --sweep square --sizes 4096,8192 \
    --impl "$TC" --strategy best --max-time "$MAX_TIME" --no-progress --out "$DATA/square_tc_strategies.csv"
fi
if [ ${#TENSOR[@]} -gt 0 ]; then  # float64 beside them (fig_dmma_square): cuBLAS's DGEMM, SIMT and DMMA kernels
  DMMA=cublas,gemm,gemm-dmma,strassen1-dmma,strassen2-dmma
  [ -f "$BUILD/libsb_cutlassdmma_$ARCH.so" ] && DMMA=$DMMA,cutlass-dmma
  step dmma $PY -m strassenbench bench --engine cuda --build-dir "$BUILD" --sweep square --sizes "$SIZES" \
    --impl "$DMMA" --dtype float64 --strategy Huge --scheme atomic --max-time "$MAX_TIME" --no-progress \
    --out "$DATA/square.csv"
fi
# the test files that hold gpu tests, named, so that the other files' extras (Snakemake, SLURM) are not needed
GPU_TESTS=$(grep -rl --include="test_*.py" "pytest.mark.gpu" tests)
step tests bash -c '"$1" -m pytest -q -m gpu -p no:cacheprovider --gpu-build "$2" "${@:4}" > "$3" 2>&1; rc=$?
  tail -3 "$3"; exit $rc' gpu-tests "$PY" "$BUILD" "$DATA/gpu_tests.txt" $GPU_TESTS
step memlimit $PY -m strassenbench memlimit --engine cuda --build-dir "$BUILD" --step 512 \
  --memory-budget "$MEMORY_BUDGET" \
  --impl cublas,strassen1,strassen1-ref,strassen2-ref --out "$DATA/memlimit.csv"
if [ ${#TENSOR[@]} -gt 0 ]; then
  step accuracy $PY -m strassenbench accuracy --engine cuda --build-dir "$BUILD" --sizes 1024,4096 --no-progress \
    --impl cublas,gemm,strassen1,strassen2-direct,cublas-tf32,gemm-tf32,strassen1-tf32,strassen2-tf32,gemm-3xtf32,strassen1-3xtf32,strassen2-3xtf32,gemm-dmma,strassen1-dmma,strassen2-dmma \
    --dtype float32 --dtype float64 --out "$DATA/accuracy.csv"
fi
if [ -f "$DATA/square.csv" ]; then
  $PY - "$DATA" <<'EOF'
import sys
from strassenbench.results import read_results
frame = read_results(f"{sys.argv[1]}/square.csv", "bench")
for dtype, part in frame.groupby("dtype"):  # cuBLAS and our GEMM are timed in both
    print(dtype)
    print(part.pivot_table(index="x", columns="impl", values="tflops").round(2).to_string())
print(frame[["status", "timing"]].value_counts().to_string())
EOF
fi
echo "== done: $DATA"
cat "$SUMMARY"
exit "$failed"
