"""The benchmark runner: timing (CUDA events or host timers), telemetry (pynvml), memory, sweeps, limits."""
