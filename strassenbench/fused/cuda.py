"""Run launches on the GPU: CuPy loads the cubin built by `strassenbench build` (cupy.RawModule).

This is the only GPU-facing code of the fused path; its tests are marked ``gpu``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from .launch import Launch

__all__ = ["CudaError", "device_arch", "module", "run"]


class CudaError(RuntimeError):
    """No usable GPU, CuPy, or cubin."""


def _cupy():  # noqa: ANN202
    try:
        import cupy
    except ImportError:
        raise CudaError("the cuda engine needs CuPy (pip install -e '.[gpu]')") from None
    return cupy


def device_arch() -> str:
    cupy = _cupy()
    return f"sm_{cupy.cuda.Device().compute_capability}"  # e.g. "90"


@lru_cache(maxsize=None)
def module(build_dir: str, arch: str):  # noqa: ANN201
    cubin = Path(build_dir) / f"strassen_{arch}.cubin"
    if not cubin.is_file():
        raise CudaError(f"{cubin} not found: run `strassenbench build --arch {arch} --out {build_dir}`")
    return _cupy().RawModule(path=str(cubin))


def run(launches: list[Launch], build_dir: str = "build", stream=None) -> None:  # noqa: ANN001
    """Enqueue ``launches`` in order on ``stream`` (default: the current stream)."""
    mod = module(build_dir, device_arch())
    for launch in launches:
        kernel = mod.get_function(launch.kernel)
        kernel(launch.grid, launch.block, launch.args, stream=stream)
