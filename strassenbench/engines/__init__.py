"""Engines run plans: ``numpy`` on the CPU with BLAS; ``emu`` the fused CUDA kernels on the CPU emulator;
``cuda`` the same kernels on the GPU through CuPy."""

from .fused_engine import cuda_gemm, emu_gemm
from .numpy_engine import gemm as numpy_gemm

ENGINES = {"numpy": numpy_gemm, "emu": emu_gemm, "cuda": cuda_gemm}
FUSED_ENGINES = ("emu", "cuda")

__all__ = ["ENGINES", "FUSED_ENGINES", "numpy_gemm", "emu_gemm", "cuda_gemm"]
