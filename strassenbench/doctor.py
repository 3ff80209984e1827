"""`strassenbench doctor`: is this machine ready to measure? Checked in order, each step naming its fix:

1. a GPU visible to NVML (CUDA_VISIBLE_DEVICES honoured) and the CUDA version its driver runs;
2. CuPy installed, built for a CUDA major the driver runs (else the gpu-cu12 extra, or a newer driver);
3. CuPy sees the GPU, and telemetry finds the same GPU by its PCI bus id;
4. CuPy's CUDA libraries load: NVRTC (its elementwise kernels) and cuBLAS;
5. the build the GPU runs (its compute capability's, strassenbench.fused.arch.build_arch) and the toolchain
   that builds it for this driver (strassenbench.fused.modules.toolchain_for: no newer than the driver when the
   GPU runs only the build's PTX);
6. the host C++ compiler nvcc needs (g++ on PATH, or $NVCC_CCBIN): the CUTLASS baseline's host code, and the
   CPU emulator.

Nothing here allocates GPU memory or launches a kernel.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["Failed", "diagnose"]


class Failed(RuntimeError):
    """A check that failed; the message says what to do."""


def _gpu() -> tuple[str, str, tuple[int, int] | None]:
    from .device import gpu_arch, visible_gpus
    from .fused.toolchain import driver_cuda

    gpus = visible_gpus()
    if not gpus:
        raise Failed("no NVIDIA GPU is visible to NVML (no driver loaded, or CUDA_VISIBLE_DEVICES hides them)")
    return gpus[0], gpu_arch() or "", driver_cuda()


def _cupy_runtime() -> tuple[str, int]:
    try:
        import cupy
    except ImportError:
        raise Failed("CuPy is not installed: pip install -e '.[gpu]' (a CUDA 13 driver) or '.[gpu-cu12]' "
                     "(a CUDA 12 driver)") from None
    return cupy.__version__, int(cupy.cuda.runtime.runtimeGetVersion())


def _cuda_device() -> tuple[str, str, bool]:
    """(compute capability as CuPy reports it, PCI bus id, whether NVML finds that GPU by it)."""
    import cupy

    from .bench.telemetry import Device, cuda_pci_bus_id

    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # noqa: BLE001 - the driver refuses: say how
        raise Failed(f"CuPy sees no GPU ({type(err).__name__}: {err})") from None
    if count < 1:
        raise Failed("CuPy sees no GPU")
    bus = cuda_pci_bus_id(0)
    return str(cupy.cuda.Device(0).compute_capability), bus, Device(pci_bus_id=bus).available


def _libraries() -> str:
    try:
        from cupy.cuda import nvrtc
        from cupy_backends.cuda.libs import cublas

        major, minor = nvrtc.getVersion()
        return f"NVRTC {major}.{minor}, cuBLAS {cublas.getVersion(0)}"
    except Exception as err:  # noqa: BLE001 - a library that does not load
        raise Failed(f"CuPy's CUDA libraries do not load ({str(err).splitlines()[0][:120]}): reinstall with "
                     "the ctk extra, pip install -e '.[gpu]' (or '.[gpu-cu12]')") from None


def host_compiler() -> str:
    """The host C++ compiler nvcc calls ($NVCC_CCBIN, checked by strassenbench.env, else g++ or c++ on PATH);
    Failed naming the fix."""
    import shutil

    from .env import EnvError, compiler_path

    try:
        chosen = compiler_path("NVCC_CCBIN") or shutil.which("g++") or shutil.which("c++")
    except EnvError as err:
        raise Failed(f"no host C++ compiler: {err}") from None
    if not chosen:
        raise Failed("no host C++ compiler: nvcc needs one (g++) for the CUTLASS baseline's host code, and the "
                     "CPU emulator compiles with it: install g++ (apt-get install g++, or conda install gxx) or "
                     "set NVCC_CCBIN")
    return chosen


def diagnose() -> Iterator[tuple[str, str]]:
    """(check, finding) per passed check, in order; Failed at the first that fails."""
    from .fused.arch import CudaError, build_arch, jit_only
    from .fused.cuda import runtime_mismatch
    from .fused.modules import toolchain_for
    from .env import EnvError
    from .fused.toolchain import ToolchainError

    name, arch, driver = _gpu()
    yield "GPU", f"{name} ({arch})"
    yield "driver", f"runs CUDA {driver[0]}.{driver[1]}" if driver else "CUDA version unknown"
    version, runtime = _cupy_runtime()
    mismatch = runtime_mismatch(driver, runtime)
    if mismatch:
        raise Failed(mismatch)
    yield "CuPy", f"{version}, CUDA {runtime // 1000}.{runtime % 1000 // 10}"
    capability, bus, matched = _cuda_device()
    if not matched:
        raise Failed(f"NVML finds no GPU at CUDA's PCI bus id {bus}: telemetry would describe another GPU")
    yield "CUDA device 0", f"compute capability {capability[:-1]}.{capability[-1]}, PCI {bus}, same GPU in NVML"
    yield "libraries", _libraries()
    try:
        build = build_arch(capability)
        toolchain = toolchain_for(build, driver, jit_only(capability))
    except (CudaError, ToolchainError, EnvError) as err:
        raise Failed(str(err)) from None
    runs = "its PTX, compiled by the driver" if jit_only(capability) else "its SASS"
    yield "toolchain", f"{toolchain.name} builds {build}; the GPU runs {runs}"
    if toolchain.frontend == "nvcc":
        yield "host compiler", host_compiler()
    yield "arch", build
