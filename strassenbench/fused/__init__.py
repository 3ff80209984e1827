"""The fused CUDA kernels of kernels/: which instantiations exist, how they are built, and how a plan becomes
launches that run on the GPU (CuPy) or on the CPU (the emulator)."""
