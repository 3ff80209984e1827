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
# the kernels for this GPU, runs the gpu tests, a small square sweep of every implementation, the memory
# limits and the system description, and writes them to data/<gpu>/ ready to commit. On sm_80 and later it
# also builds the tensor-core kernels (TcHuge, with CUTLASS's 3xTF32 SGEMM), times them in the same sweep and
# writes the accuracy table (accuracy.csv).
#
# Environment: PYTHON (default .venv/bin/python if present, else python3), SIZES (default 1024:8192:1024),
# DATA (default data), BUILD (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
SIZES=${SIZES:-1024:8192:1024}
BUILD=${BUILD:-build}

$PY -m strassenbench doctor || exit 2
ARCH=$($PY -m strassenbench doctor --arch)
SLUG=$($PY -c "from strassenbench.device import slug, visible_gpus; print(slug(visible_gpus()[0]))")
DATA=${DATA:-data}/$SLUG
mkdir -p "$DATA"
echo "== $SLUG: build $ARCH into $BUILD, results in $DATA"

TENSOR=""
if [ "${ARCH#sm_}" -ge 80 ]; then TENSOR="--strategy TcHuge"; fi  # TF32 tensor cores: sm_80 and later
$PY -m strassenbench build --arch "$ARCH" --dtype float32 --dtype float64 --strategy Small --strategy Medium \
  --strategy Large --strategy Tall --strategy Wide --strategy Huge $TENSOR --out "$BUILD" 2>&1 | tail -4
cp "$BUILD/resources.csv" "$DATA/resources_$ARCH.csv"

IMPLS=cublas,gemm,strassen1,strassen1-ref,strassen2-hybrid,strassen2-ref,strassen2-direct
[ -f "$BUILD/libsb_cutlass_$ARCH.so" ] && IMPLS=$IMPLS,cutlass  # the CUTLASS baseline needs nvcc
if [ -n "$TENSOR" ]; then
  IMPLS=$IMPLS,cublas-tf32,gemm-tf32,gemm-3xtf32,strassen1-tf32,strassen1-3xtf32,strassen2-3xtf32
  [ -f "$BUILD/libsb_cutlass3xtf32_$ARCH.so" ] && IMPLS=$IMPLS,cutlass-3xtf32
fi

status=0
$PY -m pytest -q -m gpu -p no:cacheprovider tests/ > "$DATA/gpu_tests.txt" 2>&1 || status=$?
tail -3 "$DATA/gpu_tests.txt"

$PY -m strassenbench sysinfo --engine cuda --out "$DATA/system.json"
$PY -m strassenbench bench --engine cuda --build-dir "$BUILD" --sweep square --sizes "$SIZES" --impl "$IMPLS" \
  --strategy Huge --scheme atomic --max-time 3 --no-progress --out "$DATA/square.csv" 2>&1 | tail -2
$PY -m strassenbench memlimit --engine cuda --build-dir "$BUILD" --step 512 \
  --impl cublas,strassen1,strassen1-ref,strassen2-ref --out "$DATA/memlimit.csv" 2>&1 | tail -2
if [ -n "$TENSOR" ]; then
  $PY -m strassenbench accuracy --engine cuda --build-dir "$BUILD" --sizes 1024,4096 --no-progress \
    --impl cublas,gemm,strassen1,strassen2-direct,cublas-tf32,gemm-tf32,strassen1-tf32,strassen2-tf32,gemm-3xtf32,strassen1-3xtf32,strassen2-3xtf32 \
    --out "$DATA/accuracy.csv" || status=$?
fi
$PY - "$DATA" <<'EOF'
import sys
import pandas as pd
from strassenbench.results import read_results
frame = read_results(f"{sys.argv[1]}/square.csv", "bench")
print(frame.pivot_table(index="x", columns="impl", values="tflops").round(2).to_string())
print(frame[["status", "timing"]].value_counts().to_string())
EOF
echo "== done: $DATA (gpu tests exit status $status)"
exit "$status"
