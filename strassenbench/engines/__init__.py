"""Engines run plans. ``numpy`` runs on the CPU; the kernel emulator and CUDA engines build on the same plans."""

from .numpy_engine import gemm as numpy_gemm

ENGINES = {"numpy": numpy_gemm}

__all__ = ["ENGINES", "numpy_gemm"]
