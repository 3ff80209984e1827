"""Planted mistakes in the kernel sources: a copy of kernels/ with one text replaced, run by a script in a fresh
process ($STRASSENBENCH_KERNELS, its own emulator cache), beside the clean copy run alike."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from strassenbench.fused.instances import kernels_dir


def assert_plant_fails(tmp_path: Path, header: str, old: str, new: str, script: str, *args: str) -> None:
    """``script`` (its arguments ``args``) prints "exact" last on the clean sources; with ``old`` (found once in
    kernels/``header``) replaced by ``new`` its last line is "wrong" or a line says "fault:"."""
    for planted in (False, True):
        kernels = tmp_path / ("planted" if planted else "clean") / "kernels"
        shutil.copytree(kernels_dir(), kernels)
        source = kernels / header
        text = source.read_text()
        assert text.count(old) == 1, old
        if planted:
            source.write_text(text.replace(old, new))
        env = {**os.environ, "STRASSENBENCH_KERNELS": str(kernels), "STRASSENBENCH_CACHE": str(kernels.parent / "c")}
        done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        if planted:
            assert lines[-1] == "wrong" or any(line.startswith("fault:") for line in lines), (old, new, lines)
        else:
            assert lines == ["exact"], lines
