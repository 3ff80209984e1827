"""Shared fixtures. Tests marked ``gpu`` run only where CuPy sees a CUDA device; elsewhere they skip."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def gpu_available() -> str | None:
    """None when a GPU is usable, else why not."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as err:  # noqa: BLE001 - no driver / no device
        return f"no CUDA device ({type(err).__name__})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = gpu_available()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

