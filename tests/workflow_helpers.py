"""Running the Snakemake workflow from the tests: a copy of the workflow in a scratch folder, and snakemake
from this interpreter's environment (its scripts, strassenbench among them, on PATH)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ["--config", "profile=smoke", "backend=numpy"]


def snakemake(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True, env=env)


def copy_workflow(target: Path) -> Path:
    for name in ("Snakefile", "config", "workflow", "environment.yml"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, target / name)
    return target
