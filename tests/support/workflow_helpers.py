"""Running the Snakemake workflow from the tests: a copy of the workflow in a scratch folder, and snakemake
from this interpreter's environment (its scripts, strassenbench among them, on PATH)."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ["--config", "profile=smoke", "backend=numpy"]


@functools.cache
def _no_cluster() -> str:
    """A folder whose ``scontrol`` fails at once. The SLURM executor plugin (the test extra installs it) runs
    `scontrol show config` when Snakemake loads it, on every run: where SLURM is installed but no controller
    runs (a machine where .ci/slurm.sh brought one up and down), that waits ten seconds for it. A run that is
    not on a cluster finds this one first: no cluster here."""
    folder = Path(tempfile.mkdtemp(prefix="no-cluster-"))
    atexit.register(shutil.rmtree, folder, True)
    stub = folder / "scontrol"
    stub.write_text("#!/bin/sh\nexit 1\n")
    stub.chmod(0o755)
    return str(folder)


def snakemake(args: list[str], cwd: Path, timeout: float | None = None,
              cluster: bool = False) -> subprocess.CompletedProcess:
    """``python -m snakemake ARGS`` in ``cwd``, this interpreter's scripts first on PATH; a run that is not
    through the SLURM profile (``cluster``) sees no SLURM (_no_cluster)."""
    bindir = str(Path(sys.executable).parent)
    first = [bindir] if cluster else [_no_cluster(), bindir]
    env = {**os.environ, "PATH": os.pathsep.join([*first, os.environ.get("PATH", "")])}
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=timeout)


def copy_workflow(target: Path) -> Path:
    for name in ("Snakefile", "config", "workflow", "environment.yml"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, target / name)
    return target


# The float32 strategies the session builds for sm_90 (conftest.float32_sm90_build), and those only
# `pytest -m slow` builds (test_kernels_build).
FLOAT32_FAST = ("Small", "Huge")
FLOAT32_SLOW = ("Medium", "Large", "Tall", "Wide")


def seed_build(target: Path, *builds: str) -> None:
    """Link the compiled units of ``builds`` (strassenbench build folders) into ``target`` (hard links, else
    copies: a build replaces a file, never writes into it): their stamps make them fresh there, so
    `strassenbench build` compiles only what they lack. The folders' resources.csv and kernel index are left
    behind, the build writes its own; a file ``target`` has already is kept."""
    target.mkdir(parents=True, exist_ok=True)
    for folder in map(Path, builds):
        for path in folder.iterdir():
            if path.is_file() and path.name != "resources.csv" and not path.name.startswith(".") \
                    and not (path.name.startswith("strassen_sm_") and path.name.count("_") == 2) \
                    and not (target / path.name).exists():
                try:
                    os.link(path, target / path.name)
                except OSError:  # another file system
                    shutil.copy2(path, target / path.name)


def config() -> dict:
    """The workflow's config/config.yaml, for what a run should produce."""
    import yaml

    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def verify_cases(profile: str) -> int:
    """The verification runs of a profile: the algorithm at every configured level, the `algorithms` list at
    the levels from 1 up, each in every dtype and shape."""
    cfg = config()
    grid = cfg["profiles"][profile]["verify"]
    per_shape = len(grid["levels"]) + len(cfg["algorithms"]) * len([lv for lv in grid["levels"] if lv])
    return per_shape * len(grid["dtypes"]) * len(grid["shapes"])


def verify_jobs(profile: str) -> int:
    """The verify jobs of a profile: one per (algorithm, levels, dtype), each running every shape."""
    return verify_cases(profile) // len(config()["profiles"][profile]["verify"]["shapes"])


def cpu_impls(profile: str = "smoke") -> list[str]:
    """The configured implementations that run without a GPU (an engine other than cuda): ``impls``, and
    ``tensor_impls`` where the profile has tensorcore on."""
    from strassenbench.impls import get_impl

    cfg = config()
    tensor = cfg["profiles"][profile].get("tensorcore") or []
    listed = [*cfg["impls"], *(cfg["tensor_impls"] if tensor is True else tensor)]
    return [i for i in dict.fromkeys(listed) if set(get_impl(i).engines) - {"cuda"}]


def swept(sweep: str, profile: str = "smoke") -> int:
    """Rows of a sweep per size: one per implementation and dtype it is timed in (the workflow's sweep_dtypes:
    the DMMA ones in float64, and cuBLAS and our GEMM in both on the square sweep beside them), the controls in
    the square sweep."""
    from strassenbench.families import DMMA
    from strassenbench.impls import get_impl

    impls = cpu_impls(profile) + (config()["controls"] if sweep == "square" else [])
    dmma = any(get_impl(i).family.name == DMMA for i in impls)
    rows = 0
    for impl in impls:
        dtypes = get_impl(impl).dtypes
        rows += len(dtypes) if "float32" not in dtypes else \
            2 if sweep == "square" and dmma and impl in ("cublas", "gemm") else 1
    return rows


def impl_checks(impls: list[str]) -> int:
    """Rows of verify_impls.csv: one per implementation and dtype it computes."""
    from strassenbench.impls import get_impl

    return sum(len(get_impl(i).dtypes) for i in impls)
