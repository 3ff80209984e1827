#!/usr/bin/env bash
# One offline call on a GPU machine (no network needed; CUDA 13 nvcc, CuPy, pandas, seaborn, pytest and
# nvidia-ml-py installed): build for the GPU, run the GPU tests, a small square sweep, the memory limits and
# the system description, everything under $OUT/data/<gpu-slug>/ so it can be committed as measured.
#
#   bash scripts/gpu_run.sh
#
# Environment: PYTHON (default python3), SIZES (default 1024:8192:1024), OUT (default ./out).
set -euo pipefail
PY=${PYTHON:-python3}
OUT=${OUT:-$PWD/out}
SIZES=${SIZES:-1024:8192:1024}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT"

ARCH=$($PY -c "from strassenbench.device import gpu_arch; from strassenbench.fused.cuda import build_arch
a = gpu_arch(); print(build_arch(a[len('sm_'):]) if a else '')")  # the build it runs: sm_86 runs sm_80's
SLUG=$($PY -c "from strassenbench.device import slug, visible_gpus; print(slug(visible_gpus()[0]))")
[ -n "$ARCH" ] || { echo "no GPU visible to pynvml" >&2; exit 1; }
DATA=$OUT/data/$SLUG
mkdir -p "$DATA"
echo "== $SLUG ($ARCH), nvcc: $(nvcc --version | tail -1)"

$PY -m strassenbench build --arch "$ARCH" --dtype float32 --dtype float64 --out build 2>&1 | tail -3
cp build/resources.csv "$DATA/resources_$ARCH.csv"

$PY -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py tests/test_bench_gpu.py 2>&1 \
  | tee "$OUT/gpu_tests.txt" | tail -5

$PY -m strassenbench sysinfo --engine cuda --out "$DATA/system.json"
$PY -m strassenbench bench --engine cuda --build-dir build --sweep square --sizes "$SIZES" \
  --impl cublas,gemm,strassen1,strassen1-ref,strassen2-hybrid,strassen2-ref,strassen2-direct \
  --strategy Huge --scheme atomic --max-time 3 --no-progress --out "$DATA/square.csv" 2>&1 | tail -2
$PY -m strassenbench memlimit --engine cuda --build-dir build --step 512 \
  --impl cublas,strassen1,strassen1-ref,strassen2-ref --out "$DATA/memlimit.csv" 2>&1 | tail -2
$PY -c "
import pandas as pd
f = pd.read_csv('$DATA/square.csv')
print(f.pivot_table(index='x', columns='impl', values='tflops').round(2).to_string())
print(f['status'].value_counts().to_string())
"
