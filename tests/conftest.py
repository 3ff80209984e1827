"""Shared fixtures. Tests marked ``gpu`` run only where CuPy sees a CUDA device; elsewhere they skip."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import tempfile
from pathlib import Path

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


@contextlib.contextmanager
def shared_folder(tmp_path_factory: pytest.TempPathFactory, name: str):  # noqa: ANN201
    """A folder of this test run that every worker of ``pytest -n`` shares, held under an exclusive lock: the
    first worker to take it does the work (a build: its stamps make the others' builds there compile nothing)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder, above each worker's own
    with open(base / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            (base / name).mkdir(exist_ok=True)
            yield base / name
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def local_smoke(tmp_path_factory: pytest.TempPathFactory, sim_build: str, float32_sm90_build):  # noqa: ANN001, ANN201
    """The smoke workflow run once locally (`snakemake --cores 1`, CPU backend): (its folder, the run). Its
    build/ starts with the session's compiled units (seed_build): the workflow's build rule runs and compiles
    only what they lack (its algorithms' plan kernels), as a rerun would."""
    from support.workflow_helpers import SMOKE, copy_workflow, seed_build, snakemake

    workdir = copy_workflow(tmp_path_factory.mktemp("local-smoke"))
    seed_build(workdir / "build", sim_build, float32_sm90_build[0])
    return workdir, snakemake(["--cores", "1", *SMOKE], workdir)


@pytest.fixture(scope="session")
def float32_sm90_build(tmp_path_factory: pytest.TempPathFactory, sim_build: str):  # noqa: ANN201
    """The float32 Small and Huge kernels for sm_90 (every variant, write mode and load width: the smallest tile
    and the one at the register and issue limits) and the CUTLASS baseline, once per session: (its folder, its
    resources table). test_kernels_build checks it, and the smoke workflow starts from its units. It starts
    from sim_build's units (seed_build), so that its Small and TcSmall units are compiled once in the session.
    The other four strategies' 240 kernels are built by a slow test (FLOAT32_SLOW)."""
    from strassenbench.fused.build import build
    from support.workflow_helpers import FLOAT32_FAST, seed_build

    with shared_folder(tmp_path_factory, "build90") as out:
        seed_build(out, sim_build)
        return str(out), build(["sm_90"], out, dtypes=("float32",), strategies=FLOAT32_FAST)



@pytest.fixture(scope="session")
def sim_build(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The kernels the CPU device loads (tests/support/cudasim/): a real sm_90 build, Small strategy, every default
    kernel in both dtypes and the presum scheme's (`build --presum`), the tensor-core TcSmall in both modes, the
    FP64 tensor-core DmmaSmall (seconds: the small tiles compile fast) and wgmma's WgLarge (sm_90a) for the GEMM
    and 1-level Strassen."""
    from strassenbench.fused.build import build

    from strassenbench.fused.instances import plan_counts, presum_counts

    with shared_folder(tmp_path_factory, "sim-build") as out:
        # the presum and wgmma kernels first: resources.csv is the last build's, the kernel index every unit's
        build(["sm_90"], out, strategies=("Small",), counts=presum_counts("strassen", 2), cutlass=False)
        build(["sm_90"], out, strategies=("WgLarge",), counts=plan_counts("strassen", 0) + plan_counts("strassen", 1),
              cutlass=False)
        build(["sm_90"], out, strategies=("Small", "TcSmall", "DmmaSmall"), cutlass=False)
    return str(out)


@pytest.fixture
def cpu_device(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """A CPU device behind the real CuPy for one test (random order, seed 0); ``cpu_device.install(...)``
    puts another (order, seed, memory)."""
    from support import cudasim

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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--gpu-build", metavar="DIR", default=None,
                     help="gpu tests: build into (or reuse) this folder, e.g. the one scripts/gpu_run.sh builds, "
                          "instead of a temporary one; what is fresh there is not compiled again")


@pytest.fixture(scope="session")
def gpu_build(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The kernels of this GPU's architecture that the gpu tests load: the paper's six strategies in both
    dtypes (``strassenbench build``'s default), built once per session, into ``--gpu-build`` when given."""
    from strassenbench.fused.build import build
    from strassenbench.fused.cuda import device_arch

    given = request.config.getoption("--gpu-build")
    with shared_folder(tmp_path_factory, "gpu-build") as shared:
        out = Path(given) if given else shared
        build([device_arch()], out)
    return str(out)


@pytest.fixture
def _broken_gpu_setup() -> None:
    pytest.fail(f"gpu test cannot run: {gpu_available()[0]}")


# With ``pytest -n N`` (pytest-xdist) a group runs on one worker: the tests that share a module-scoped fixture
# (their group "<module>::<fixture>", which a test that takes it by name marks itself with xdist_group), the
# workflow runs (test_project and test_slurm share the smoke run), and the gpu tests; every other test is a unit
# of its own. The groups that take minutes go first, so that the workers start on them together and the short
# tests fill in behind; the session's shared builds are made once (shared_folder). Each worker writes the groups
# of its collection into a folder the controller made (GROUPS), where GroupScheduling reads them.
WORKFLOW_MODULES = ("test_project.py", "test_slurm.py")
FIRST = ("test_kernels_build.py::float32_sm90", "workflow", "test_kernels_build.py::float64_wide",
         "test_kernels_build.py::huge_sm80", "test_kernels_build.py::tensor_huge", "test_kernels_build.py::dmma_build")
GROUPS = "STRASSENBENCH_TEST_GROUPS"
SMOKE_FIXTURES = {"local_smoke", "cluster_run"}


def _group(item: pytest.Item) -> str | None:
    marked = [m.args[0] if m.args else m.kwargs.get("name") for m in item.iter_markers("xdist_group")]
    if marked:
        return str(marked[0])
    if item.get_closest_marker("gpu"):  # the marker, not a keyword: tests/gpu/ is a keyword of its every test
        return "gpu"  # one GPU: its tests one after another, never two timings at once
    module = item.path.name
    if module in WORKFLOW_MODULES:
        return "workflow"
    info = getattr(item, "_fixtureinfo", None)
    shared = sorted({name for name, defs in (info.name2fixturedefs.items() if info else ())
                     if any(d.scope in ("module", "class", "package") for d in defs)})
    return f"{module}::{'+'.join(shared)}" if shared else None


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER"):  # -n's controller
        folder = tempfile.mkdtemp(prefix="strassenbench-test-groups-")
        os.environ[GROUPS] = folder  # the workers, started after this, inherit it
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {item: _group(item) for item in items}
    rank = {name: i for i, name in enumerate(FIRST)}
    # stable: else as collected; in the workflow group the tests without the smoke run first, so that its worker
    # works while the smoke run's build (float32_sm90_build, on the other worker) is made
    items.sort(key=lambda item: (rank.get(groups[item] or "", len(FIRST)),
                                 bool(SMOKE_FIXTURES & set(getattr(item, "fixturenames", ())))))
    worker, folder = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get(GROUPS)
    if worker and folder:
        mapping = {item.nodeid: group for item, group in groups.items() if group}
        (Path(folder) / f"{worker}.json").write_text(json.dumps(mapping))
    _mark_gpu_tests(config, items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN001, ANN201
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """LoadScopeScheduling whose unit of work is a test's group (_group), read from the workers' files."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # every worker has collected by the time the controller schedules
                self.groups = {}
                for path in sorted(Path(os.environ[GROUPS]).glob("*.json")):
                    self.groups.update(json.loads(path.read_text()))
            return self.groups.get(nodeid, nodeid)

    config.option.loadscopereorder = False  # the collection's order: FIRST's groups first
    return GroupScheduling(config, log)


def _mark_gpu_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason, broken = gpu_available()
    if reason is None:
        return
    mark = pytest.mark.usefixtures("_broken_gpu_setup") if broken else pytest.mark.skip(reason=f"gpu test: {reason}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(mark)



MODEL_SIZES = "512:20480:512"  # the paper profile's sweep sizes, as the workflow's model rules predict them


def write_model_files(folder, gpu: str = "V100", resources=None) -> None:  # noqa: ANN001
    """The model's files of a run's folder (strassenbench.model.files.MODEL_FILES, and GPU_MODEL_FILES where it
    has sweeps), written by `strassenbench model` as the workflow's model rules write them, for ``gpu`` (a
    built-in spec)."""
    from pathlib import Path

    folder = Path(folder).resolve()
    more = ["--resources", str(Path(resources).resolve())] if resources else []
    with contextlib.chdir(folder):  # never the build/resources.csv of the directory the tests run in
        _write_model_files(folder, gpu, more)


def _write_model_files(folder, gpu: str, more: list[str]) -> None:  # noqa: ANN001
    from strassenbench.cli import main

    for sweep in ("square", "rankk", "panel"):  # with the config's scheme, atomic
        assert main(["model", "predict", "--gpu", gpu, "--sweep", sweep, "--sizes", MODEL_SIZES, "--scheme",
                     "atomic", *more, "--out", str(folder / f"model_{sweep}.csv")]) == 0
    assert main(["model", "predict", "--gpu", gpu, "--sweep", "square", "--sizes", MODEL_SIZES, "--impl",
                 "gemm,strassen1,strassen2-direct", "--strategy", "Huge", "--strategy", "Small", "--model", "issue",
                 "--model", "l2", *more, "--out", str(folder / "model_strategies.csv")]) == 0
    assert main(["model", "speedup", *(str(folder / f"model_{s}.csv") for s in ("square", "rankk", "panel")),
                 "--out", str(folder / "model_speedup.csv")]) == 0
    assert main(["model", "spec", "--gpu", "V100", "--gpu", gpu, "--out", str(folder / "model_spec.csv")]) == 0
    assert main(["model", "bounds", "--gpu", gpu, "--out", str(folder / "model_bounds.csv")]) == 0
    assert main(["model", "occupancy", *more, "--out", str(folder / "model_occupancy.csv")]) == 0
    assert main(["model", "issue-bounds", *more, "--out", str(folder / "model_issue_bounds.csv")]) == 0
    assert main(["model", "winners", "--gpu", gpu, "--sizes", "2048,8192,16384", *more,
                 "--out", str(folder / "model_winners.csv")]) == 0
    sweeps = [str(folder / f"{s}.csv") for s in ("square", "rankk", "panel") if (folder / f"{s}.csv").exists()]
    if sweeps:  # a GPU run's (model_validate, strassenbench.model.files.GPU_MODEL_FILES)
        assert main(["model", "validate", *sweeps, "--gpu", gpu, "--model", "issue", "--model", "l2", *more,
                     "--out", str(folder / "model_validate.csv")]) == 0


@pytest.fixture(scope="session")
def modeled(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """``modeled(name)``: a copy of tests/fixtures/<name> with the model's files beside its results (for the
    GPU spec its name holds: gpu_a an A100, gpu_b an H100), made once per session."""
    import shutil
    from pathlib import Path

    made: dict[str, Path] = {}
    gpus = {"gpu_a": "A100", "gpu_b": "H100"}

    def make(name: str) -> Path:
        if name not in made:
            folder = tmp_path_factory.mktemp("modeled") / name
            shutil.copytree(Path(__file__).parent / "fixtures" / name, folder)
            write_model_files(folder, gpus[name])
            made[name] = folder
        return made[name]

    return make
