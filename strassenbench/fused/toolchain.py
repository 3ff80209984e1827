"""Where the CUDA tools are: $STRASSENBENCH_CUDA_BIN, else PATH, else the pip packages nvidia-cuda-nvcc and
nvidia-cuda-cuobjdump (their bin/ folder inside site-packages)."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

__all__ = ["ToolchainError", "find_tool", "tool_version", "first_error"]


class ToolchainError(RuntimeError):
    """A CUDA tool that is needed and not found."""


def _pip_bins() -> list[Path]:
    try:
        import nvidia  # namespace package of the pip CUDA wheels
    except ImportError:
        return []
    return [Path(p) / sub / "bin" for p in nvidia.__path__ for sub in ("cu13", "cu12", "cuda_nvcc", "cuda_cuobjdump")]


@lru_cache(maxsize=None)
def find_tool(name: str) -> str:
    override = os.environ.get("STRASSENBENCH_CUDA_BIN")
    candidates = [Path(override) / name] if override else []
    found = shutil.which(name)
    if found:
        candidates.append(Path(found))
    candidates += [b / name for b in _pip_bins()]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise ToolchainError(
        f"{name} not found (install it with: pip install nvidia-cuda-nvcc nvidia-cuda-cuobjdump, "
        "or put a CUDA toolkit's bin/ on PATH)"
    )


@lru_cache(maxsize=None)
def tool_version(name: str) -> str:
    out = subprocess.run([find_tool(name), "--version"], capture_output=True, text=True, check=False).stdout
    return out.strip().splitlines()[-1] if out.strip() else "unknown"


def first_error(stderr: str) -> str:
    """The first line of a compiler's output that says "error", for a one-line message."""
    return next((line for line in stderr.splitlines() if "error" in line), stderr.strip()[:200])
