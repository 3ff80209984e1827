"""The CUTLASS baseline: CUTLASS 4.2's SIMT SGEMM in the paper's configuration (kernels/baseline/), built with
the nvcc of the toolchain the fused kernels use from the nvidia-cutlass package's headers (and CCCL's, from
nvidia-cuda-cccl or the CUDA toolkit). It needs nvcc: with the NVRTC toolchain (the cu12 extra) there is no
baseline, and build says so.

``build_arch`` writes ``cutlass_<arch>.cubin`` (its machine code joins resources.csv, read as the fused
kernels' are) and ``libsb_cutlass_<arch>.so``, a shared library with one ``extern "C"`` entry that the
``cutlass`` implementation calls through ctypes on the GPU; its device code carries SASS and PTX.
"""

from __future__ import annotations

import ctypes
import importlib.util
import subprocess
from functools import lru_cache
from pathlib import Path

import pandas as pd

from ..io import write_atomic
from .modules import SASS_COLUMNS, BuildError, blocks_row, disassemble, parse_ptxas
from .instances import kernels_dir, sources_digest
from .sass import mainloop_metrics, opcode_counts, parse_sass
from .toolchain import Toolchain, ToolchainError, first_error, run_tool

__all__ = ["KERNEL", "SOURCE", "include_dirs", "build_arch", "sgemm"]

KERNEL = "cutlass_simt_sgemm_128x128x8_32x64x8_2stage"
SOURCE = Path("baseline") / "cutlass_sgemm.cu"
# CUTLASS's headers warn about constexpr host calls in conv code this GEMM does not use.
FLAGS = ["-std=c++17", "-O3", "-Xptxas", "-v", "-lineinfo", "--expt-relaxed-constexpr", "-diag-suppress",
         "20013,20015"]


def include_dirs() -> list[Path]:
    """CUTLASS's include/ (nvidia-cutlass) and CCCL's (nvidia-cuda-cccl; a CUDA toolkit has it built in)."""
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        raise ToolchainError("the CUTLASS baseline needs CUTLASS's headers: pip install nvidia-cutlass")
    dirs = [Path(spec.origin).parent / "source" / "include"]
    try:
        import nvidia
    except ImportError:
        return dirs
    dirs += [cccl for p in nvidia.__path__ for sub in ("cu13", "cu12") if (cccl := Path(p) / sub / "include" / "cccl").is_dir()]
    return dirs


def _compile(nvcc: str, arch: str, extra: list[str], target: Path) -> subprocess.CompletedProcess:
    includes = [arg for d in include_dirs() for arg in ("-I", str(d))]
    cmd = [nvcc, *FLAGS, *extra, *includes, str(kernels_dir() / SOURCE), "-o", str(target)]
    return run_tool(cmd)


def build_arch(arch: str, out: Path, toolchain: Toolchain, force: bool = False) -> tuple[dict, bool] | None:
    """Build the baseline for ``arch`` into ``out`` with ``toolchain``'s nvcc: (its resources.csv row, whether
    it was rebuilt); None when the toolchain has no nvcc (NVRTC cannot compile CUTLASS's host side)."""
    if toolchain.frontend != "nvcc":
        return None
    cubin, lib, stamp = out / f"cutlass_{arch}.cubin", out / f"libsb_cutlass_{arch}.so", out / f"cutlass_{arch}.stamp"
    table = out / f"cutlass_{arch}.csv"
    digest = sources_digest(toolchain.name, " ".join(FLAGS), arch, *map(str, include_dirs()))
    rebuilt = force or not all(p.is_file() for p in (cubin, lib, stamp, table)) or stamp.read_text() != digest
    if rebuilt:
        results = {}
        compute = arch.replace("sm_", "compute_")
        shared = ["-shared", "-Xcompiler", "-fPIC", "-gencode", f"arch={compute},code=[{arch},{compute}]"]
        for extra, target in (([f"-arch={arch}", "-cubin"], cubin), (shared, lib)):
            tmp = target.with_name(f".{target.name}.tmp")
            result = _compile(toolchain.path, arch, extra, tmp)
            if result.returncode != 0:
                (out / f"cutlass_{arch}.log").write_text(result.stdout + result.stderr)
                raise BuildError(f"nvcc failed for the CUTLASS baseline on {arch}: {first_error(result.stderr)} "
                                 f"(full log: {out / f'cutlass_{arch}.log'})")
            results[target] = result
            tmp.replace(target)
        log = results[cubin].stdout + results[cubin].stderr
        sass = disassemble(cubin, arch)
        code = next((c for name, c in parse_sass(sass or "").items() if "cutlass" in name), [])
        props = next((p for name, p in parse_ptxas(log).items() if "cutlass" in name), None)
        if props is None or (sass is not None and not code):
            raise BuildError(f"no CUTLASS kernel in {cubin}")
        row = blocks_row(KERNEL, arch, "cutlass", "Huge", "float32", (1, 1, 1), "plain", "scalar", props,
                         opcode_counts(code), mainloop_metrics(code))
        if sass is None:
            row.update(dict.fromkeys(SASS_COLUMNS))
        write_atomic(table, pd.DataFrame([row]).to_csv(index=False))
        write_atomic(stamp, digest)
    return pd.read_csv(table).iloc[0].to_dict(), rebuilt


@lru_cache(maxsize=None)
def _library(build_dir: str, arch: str) -> ctypes.CDLL:
    path = Path(build_dir) / f"libsb_cutlass_{arch}.so"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run `strassenbench build --arch {arch} --out {build_dir}`")
    lib = ctypes.CDLL(str(path))
    lib.sb_cutlass_sgemm.restype = ctypes.c_int
    lib.sb_cutlass_sgemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_void_p,
                                     ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_void_p,
                                     ctypes.c_int, ctypes.c_void_p]
    return lib


def sgemm(A, B, C, alpha: float, beta: float, build_dir: str = "build") -> None:  # noqa: ANN001 - CuPy arrays
    """C <- alpha A B + beta C by the CUTLASS baseline on CuPy's current stream (float32, row-major)."""
    import cupy

    from .cuda import device_arch

    if any(x.dtype != cupy.float32 for x in (A, B, C)):
        raise ValueError("the CUTLASS baseline is CUTLASS's SGEMM: float32 only")
    lds = []
    for name, x in (("A", A), ("B", B), ("C", C)):
        if x.strides[1] != 4 or x.strides[0] % 4:
            raise ValueError(f"{name} must be row-major with unit column stride")
        lds.append(x.strides[0] // 4)
    (m, k), n = A.shape, B.shape[1]
    status = _library(build_dir, device_arch()).sb_cutlass_sgemm(
        m, n, k, alpha, A.data.ptr, lds[0], B.data.ptr, lds[1], beta, C.data.ptr, lds[2],
        cupy.cuda.get_current_stream().ptr)
    if status != 0:
        raise RuntimeError(f"CUTLASS returned status {status} for {m}x{k}x{n}")
