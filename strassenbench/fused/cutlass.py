"""The CUTLASS baselines: CUTLASS 4.2's SIMT SGEMM in the paper's configuration and, beyond the paper, its 3xTF32
tensor-core SGEMM in its example-27 configuration, its FP64 tensor-op DGEMM in its default sm_80 one and its
sm_90 TMA warp-specialized TF32 GEMM (sm_90a; kernels/baseline/), built with the nvcc of the toolchain the
fused kernels use from the nvidia-cutlass package's headers (and CCCL's, from nvidia-cuda-cccl or the CUDA
toolkit). They need nvcc: with the NVRTC toolchain (the cu12 extra) there is no baseline, and build says so.

``build_baseline`` writes ``<prefix>_<arch>.cubin`` (its machine code joins resources.csv, read as the fused
kernels' are) and ``libsb_<prefix>_<arch>.so``, a shared library with one ``extern "C"`` entry that the
``cutlass`` (``cutlass-3xtf32``, ``cutlass-dmma``) implementation calls through ctypes on the GPU; its device code carries SASS
and PTX.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

from ..families import MODES, SIMT, family_of
from ..io import write_atomic
from .arch import CudaError
from .modules import SASS_COLUMNS, BuildError, blocks_row, disassemble, parse_ptxas
from .instances import kernels_dir, sources_digest
from .sass import mainloop_metrics, opcode_counts, parse_sass
from .toolchain import Toolchain, ToolchainError, first_error, run_tool

__all__ = ["Baseline", "BASELINES", "KERNEL", "SOURCE", "include_dirs", "build_baseline", "baseline_impl", "sgemm"]


@dataclass(frozen=True)
class Baseline:
    kernel: str  # its name in resources.csv
    source: Path  # under kernels/
    entry: str  # the shared library's extern "C" function
    prefix: str  # of its files in the build folder
    strategy: str  # the strategy column: ours of the same tile, or the CUTLASS tile's shape
    mode: str  # its run mode (strassenbench.families)
    threads: int
    min_arch: int  # the oldest architecture it compiles for
    dtype: str = "float32"
    max_arch: int | None = None  # the newest (None: any from min_arch on)
    arch_suffix: str = ""  # what its target adds to the build's architecture: "a" (sm_90a) for wgmma

    def builds_for(self, arch: str) -> bool:
        number = int(arch.removeprefix("sm_"))
        return number >= self.min_arch and (self.max_arch is None or number <= self.max_arch)


BASELINES = {baseline.mode: baseline for baseline in (
    Baseline("cutlass_simt_sgemm_128x128x8_32x64x8_2stage", Path("baseline") / "cutlass_sgemm.cu",
             "sb_cutlass_sgemm", "cutlass", "Huge", SIMT, 256, 70),
    Baseline("cutlass_tensorop_3xtf32_sgemm_128x64x16_64x32x16_3stage",
             Path("baseline") / "cutlass_sgemm_3xtf32.cu", "sb_cutlass_sgemm_3xtf32", "cutlass3xtf32",
             "128x64x16", "3xtf32", 128, 80),
    Baseline("cutlass_tensorop_d884gemm_128x128x16_32x64x16_3stage", Path("baseline") / "cutlass_dgemm.cu",
             "sb_cutlass_dgemm", "cutlassdmma", "128x128x16", "dmma", 256, 80, "float64"),
    # the wgmma family's: CUTLASS's sm_90 TMA warp-specialized TF32 GEMM (sm_90a only), implementation cutlass-tf32-sm90
    Baseline("cutlass_tensorop_tf32_sgemm_sm90_128x128x32_tma_ws_cooperative",
             Path("baseline") / "cutlass_sgemm_tf32_sm90.cu", "sb_cutlass_sgemm_tf32_sm90", "cutlasstf32sm90",
             "WgLarge", "wg1xtf32", 384, 90, max_arch=90, arch_suffix="a"),
)}  # by mode (strassenbench.families): the implementation cutlass[-<suffix>] (cutlass-tf32-sm90) runs it
KERNEL, SOURCE = BASELINES[SIMT].kernel, BASELINES[SIMT].source
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


# A header of each include folder whose text changes with its release.
VERSION_HEADERS = ("cutlass/version.h", "cuda/std/__cccl/version.h")


def headers_digest() -> str:
    """A hash of the release headers (VERSION_HEADERS) found in include_dirs(); ToolchainError without
    CUTLASS's headers."""
    h = hashlib.sha256()
    for folder in include_dirs():
        for name in VERSION_HEADERS:
            if (folder / name).is_file():
                h.update(name.encode())
                h.update((folder / name).read_bytes())
    return h.hexdigest()


def _compile(nvcc: str, arch: str, extra: list[str], target: Path, source: Path) -> subprocess.CompletedProcess:
    includes = [arg for d in include_dirs() for arg in ("-I", str(d))]
    cmd = [nvcc, *FLAGS, *extra, *includes, str(kernels_dir() / source), "-o", str(target)]
    return run_tool(cmd)


def build_baseline(arch: str, out: Path, toolchain: Toolchain, force: bool = False,
               baseline: Baseline = BASELINES[SIMT]) -> tuple[dict, bool] | None:
    """Build ``baseline`` for ``arch`` into ``out`` with ``toolchain``'s nvcc: (its resources.csv row, whether
    it was rebuilt); None when the toolchain has no nvcc (NVRTC cannot compile CUTLASS's host side)."""
    if toolchain.frontend != "nvcc":
        return None
    name = f"{baseline.prefix}_{arch}"
    cubin, lib, stamp = out / f"{name}.cubin", out / f"libsb_{name}.so", out / f"{name}.stamp"
    table = out / f"{name}.csv"
    # The stamp: what was compiled and how, then which headers (by their version files' text, not their paths,
    # so that a build folder made on another machine, a login node say, stays fresh where the headers are).
    digest = sources_digest(toolchain.name, " ".join(FLAGS), arch, str(baseline.source))
    have = all(p.is_file() for p in (cubin, lib, stamp, table))
    recorded = stamp.read_text().split("\n") if have else []
    try:
        headers = headers_digest()
    except ToolchainError:  # no headers here: a baseline built elsewhere with this toolchain is used as it is
        if force or not have or recorded[0] != digest:
            raise
        return pd.read_csv(table).iloc[0].to_dict(), False
    rebuilt = force or recorded != [digest, headers]
    if rebuilt:
        results = {}
        sm = arch + baseline.arch_suffix  # what it compiles for: sm_90a for the wgmma family's
        compute = sm.replace("sm_", "compute_")
        shared = ["-shared", "-Xcompiler", "-fPIC", "-gencode", f"arch={compute},code=[{sm},{compute}]"]
        for extra, target in (([f"-arch={sm}", "-cubin"], cubin), (shared, lib)):
            # nvcc writes into a folder of this compile's own, made exclusively: never through a planted link
            private = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=out))
            try:
                tmp = private / target.name
                result = _compile(toolchain.path, arch, extra, tmp, baseline.source)
                if result.returncode != 0:
                    (out / f"{name}.log").write_text(result.stdout + result.stderr)
                    raise BuildError(f"nvcc failed for the CUTLASS baseline {baseline.kernel} on {arch}: "
                                     f"{first_error(result.stderr)} (full log: {out / f'{name}.log'})")
                results[target] = result
                tmp.replace(target)
            finally:
                shutil.rmtree(private, ignore_errors=True)
        log = results[cubin].stdout + results[cubin].stderr
        sass = disassemble(cubin, sm)
        code = next((c for name, c in parse_sass(sass or "").items() if "cutlass" in name), [])
        props = next((p for name, p in parse_ptxas(log).items() if "cutlass" in name), None)
        if props is None or (sass is not None and not code):
            raise BuildError(f"no CUTLASS kernel in {cubin}")
        source = baseline_impl(baseline.mode)
        row = blocks_row(baseline.kernel, arch, source, baseline.strategy, baseline.dtype, (1, 1, 1), "plain", "scalar",
                         props, opcode_counts(code), mainloop_metrics(code), baseline.mode, baseline.threads)
        if sass is None:
            row.update(dict.fromkeys(SASS_COLUMNS))
        write_atomic(table, pd.DataFrame([row]).to_csv(index=False))
        write_atomic(stamp, f"{digest}\n{headers}")
    return pd.read_csv(table).iloc[0].to_dict(), rebuilt


def baseline_impl(mode: str) -> str:
    """The implementation that runs the baseline of ``mode``: cutlass, cutlass-<suffix>, cutlass-tf32-sm90 (wgmma's,
    named by what CUTLASS calls it rather than by our mode's suffix)."""
    if family_of(mode).arch_suffix:
        return "cutlass-tf32-sm90"
    suffix = MODES[mode].suffix
    return f"cutlass-{suffix}" if suffix else "cutlass"


@lru_cache(maxsize=None)
def _entry(build_dir: str, arch: str, mode: str):  # noqa: ANN202 - a ctypes function
    baseline = BASELINES[mode]
    path = Path(build_dir) / f"libsb_{baseline.prefix}_{arch}.so"
    if not path.is_file():
        family = family_of(mode)
        strategy = f" --strategy {family.cutlass_tile}" if family.tensor else ""
        strategy += f" --dtype {baseline.dtype}" if baseline.dtype != "float32" else ""
        raise FileNotFoundError(f"{path} not found: run `strassenbench build --arch {arch}{strategy} --out {build_dir}`")
    entry = getattr(ctypes.CDLL(str(path)), baseline.entry)
    entry.restype = ctypes.c_int
    scalar = ctypes.c_double if baseline.dtype == "float64" else ctypes.c_float
    entry.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, scalar, ctypes.c_void_p, ctypes.c_int,
                      ctypes.c_void_p, ctypes.c_int, scalar, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    return entry


def sgemm(A, B, C, alpha: float, beta: float, build_dir: str = "build", mode: str = SIMT) -> None:  # noqa: ANN001
    """C <- alpha A B + beta C by the CUTLASS baseline of ``mode`` (simt, 3xtf32: float32; dmma: float64) on
    CuPy's current stream (row-major CuPy arrays of the baseline's dtype)."""
    import cupy

    from .cuda import device_arch

    dtype = BASELINES[mode].dtype
    if any(x.dtype != cupy.dtype(dtype) for x in (A, B, C)):
        raise ValueError(f"the CUTLASS baseline of {mode} is CUTLASS's {'D' if dtype == 'float64' else 'S'}GEMM: "
                         f"{dtype} only")
    itemsize = cupy.dtype(dtype).itemsize
    lds = []
    for name, x in (("A", A), ("B", B), ("C", C)):
        if x.strides[1] != itemsize or x.strides[0] % itemsize:
            raise ValueError(f"{name} must be row-major with unit column stride")
        lds.append(x.strides[0] // itemsize)
    (m, k), n = A.shape, B.shape[1]
    status = _entry(build_dir, device_arch(), mode)(
        m, n, k, alpha, A.data.ptr, lds[0], B.data.ptr, lds[1], beta, C.data.ptr, lds[2],
        cupy.cuda.get_current_stream().ptr)
    if status != 0:  # a CudaError: one line from verify and accuracy, an error row of a bench
        raise CudaError(f"CUTLASS returned status {status} for {m}x{k}x{n}")
