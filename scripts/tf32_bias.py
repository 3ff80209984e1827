"""Where does a tensor-core SGEMM lose accuracy? Relative error and signed bias against a float64 reference,
with random operands on both sides, on one side only, and signed, for k = 8 to 4096 (usage: python
scripts/tf32_bias.py cuda|numpy, from the repository root after `strassenbench build` into build/; on cuda the
wgmma GEMM needs an sm_90 GPU)."""
import sys
import numpy as np
from strassenbench.impls import IMPLS

engine = sys.argv[1]
rng = np.random.default_rng(0)


def err(name, A, B):
    C = np.zeros((A.shape[0], B.shape[1]), np.float32)
    opts = {} if IMPLS[name].kind == "blas" else {"build_dir": "build"}
    IMPLS[name](A, B, C, 1.0, 0.0, engine=engine, **opts)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    return np.linalg.norm(C - ref) / np.linalg.norm(ref), np.mean(C - ref) / np.mean(np.abs(ref))


names = ["cublas", "gemm-3xtf32", "gemm-tf32", "gemm-3xtf32-wgmma"] + (["cutlass-3xtf32"] if engine == "cuda" else [])
print("k      operands     " + "  ".join(f"{n:>26}" for n in names))
for m, k in [(512, 8), (512, 64), (512, 512), (512, 4096)]:
    Ar, Br = rng.random((m, k), dtype=np.float32), rng.random((k, m), dtype=np.float32)
    Ai, Bi = rng.integers(0, 8, (m, k)).astype(np.float32), rng.integers(0, 8, (k, m)).astype(np.float32)
    for label, A, B in (("both", Ar, Br), ("A only", Ar, Bi), ("B only", Ai, Br), ("signed", Ar - 0.5, Br - 0.5)):
        cells = [err(n, A, B) for n in names]
        print(f"{k:<6} {label:<12} " + "  ".join(f"{e:10.3e} bias {b:+10.3e}" for e, b in cells), flush=True)
