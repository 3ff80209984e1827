"""Shared fixtures. Tests marked ``gpu`` run only where CuPy sees a CUDA device; elsewhere they skip."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def gpu_available() -> tuple[str | None, bool]:
    """(None when a GPU is usable, else why not; whether that is a broken set-up rather than no GPU)."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed", False
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device", False
    except Exception as err:  # noqa: BLE001 - no driver / no device
        from strassenbench.fused.cuda import driver_mismatch

        mismatch = driver_mismatch()  # a GPU whose driver is older than CuPy's CUDA: fail, never skip
        if mismatch:
            return mismatch, True
        return f"no CUDA device ({type(err).__name__})", False
    return None, False


@pytest.fixture(scope="session")
def local_smoke(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """The smoke workflow run once locally (`snakemake --cores 1`, CPU backend): (its folder, the run)."""
    from workflow_helpers import SMOKE, copy_workflow, snakemake

    workdir = copy_workflow(tmp_path_factory.mktemp("local-smoke"))
    return workdir, snakemake(["--cores", "1", *SMOKE], workdir)


@pytest.fixture(scope="session")
def sim_build(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The kernels the CPU device loads (tests/cudasim.py): a real sm_90 build, Small strategy, every default
    kernel in both dtypes, and the tensor-core TcSmall in both modes (seconds: the small tiles compile fast)."""
    from strassenbench.fused.build import build

    out = tmp_path_factory.mktemp("sim-build")
    build(["sm_90"], out, strategies=("Small", "TcSmall"), cutlass=False)
    return str(out)


@pytest.fixture
def cpu_device(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """A CPU device behind the real CuPy for one test (random order, seed 0); ``cpu_device.install(...)``
    puts another (order, seed, memory)."""
    import cudasim

    from strassenbench.fused import cuda
    from strassenbench.reference import array_ops

    class Installer:
        def install(self, **options: object) -> cudasim.CpuDevice:
            self.device = cudasim.install(monkeypatch, **options)
            return self.device

    installer = Installer()
    installer.install()
    yield installer
    cuda.clear_caches()
    array_ops.clear_caches()


@pytest.fixture
def _broken_gpu_setup() -> None:
    pytest.fail(f"gpu test cannot run: {gpu_available()[0]}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason, broken = gpu_available()
    if reason is None:
        return
    mark = pytest.mark.usefixtures("_broken_gpu_setup") if broken else pytest.mark.skip(reason=f"gpu test: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(mark)

