"""strassenbench: reproduce and extend fused-kernel Strassen on NVIDIA GPUs (FLAME Working Note #88)."""

__version__ = "0.1.0"
