"""Which build a GPU runs: the architecture mapping that the build, the cuda runner, the doctor and the
workflow share (no CuPy, no compiler: it imports nothing of strassenbench.fused)."""

from __future__ import annotations

__all__ = ["CudaError", "BUILD_FOR_MAJOR", "build_arch", "jit_only"]


class CudaError(RuntimeError):
    """No usable GPU, CuPy, or module."""


# The builds a GPU runs, by compute-capability major: machine code is compatible within a major for equal or
# higher minors (sm_86 and sm_89 run sm_80 code, sm_75 runs sm_70 code). A newer major (sm_100, sm_120) runs
# the newest build's PTX, which the driver compiles when the module loads (every fatbin carries it), and which
# only a driver at least as new as the toolchain can compile (strassenbench.fused.toolchain.choose).
BUILD_FOR_MAJOR = {7: "sm_70", 8: "sm_80", 9: "sm_90"}


def build_arch(compute_capability: str) -> str:
    """The build a GPU of ``compute_capability`` ("86", "90", "100", as CuPy reports it) runs: its major's
    machine code, or for a major newer than every build the newest build's PTX."""
    try:
        major = int(compute_capability[:-1])
    except ValueError:
        raise CudaError(f"unrecognised compute capability {compute_capability!r}") from None
    if major < min(BUILD_FOR_MAJOR):
        raise CudaError(f"compute capability {compute_capability[:-1]}.{compute_capability[-1]} is older than "
                        f"every build (the oldest is {BUILD_FOR_MAJOR[min(BUILD_FOR_MAJOR)]}, V100)")
    return BUILD_FOR_MAJOR.get(major, BUILD_FOR_MAJOR[max(BUILD_FOR_MAJOR)])


def jit_only(compute_capability: str) -> bool:
    """Whether a GPU of ``compute_capability`` runs no machine code of any build, only PTX the driver compiles."""
    return int(compute_capability[:-1]) > max(BUILD_FOR_MAJOR)
