"""Compiled modules: how one kernel source becomes a fatbin, what the compiler reports, and whether a built
module is still what the sources and this machine's toolchain would build (its stamp).

The bottom layer of strassenbench.fused's build side: ``build`` (the fused kernels), ``cutlass`` (the CUTLASS
baseline) and ``cuda`` (which refuses a stale module when loading) all import from here, and this imports
neither of them.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..occupancy import ARCHS, blocks_per_sm
from ..families import ALL_STRATEGIES
from ..strategies import STRATEGIES
from .arch import build_arch, jit_only
from .instances import sources_digest
from .sass import MAINLOOP_COLUMNS, opcode_counts, parse_sass
from .toolchain import (Toolchain, ToolchainError, ToolKilled, choose, driver_cuda, find_tool, first_error, run_tool,
                        toolchains)

__all__ = ["BuildError", "RESOURCE_COLUMNS", "SASS_COLUMNS", "FLAGS", "SUPPORTED_ARCHS", "blocks_row", "built_by",
           "compile_module", "disassemble", "parse_ptxas", "sass_counts", "toolchain_for", "unit_digest",
           "unit_fresh", "unit_of"]

# The opcode classes of a kernel's machine code (strassenbench.fused.sass.opcode_counts).
OPCODE_COLUMNS = ["ffma", "lds128", "lds_other", "ldg", "local_mem_ops", "global_reductions", "tile_reductions"]
RESOURCE_COLUMNS = [
    "kernel", "arch", "source", "strategy", "dtype", "mode", "W_A", "W_B", "W_C", "write_mode", "loads", "registers",
    "spill_stores", "spill_loads", "smem_bytes", "stack_bytes", "blocks_per_sm", *OPCODE_COLUMNS, *MAINLOOP_COLUMNS,
]
# What the stamp records of the compile (strassenbench.fused.toolchain.Toolchain.ptx and .assemble).
FLAGS = ("c++17 lineinfo | ptxas -O3 -lineinfo, register-usage levels 4 0 8 (the unit's PTX, --entry) on spills or "
         "late loads and for the tuned kernels, FLIGHT 8 and 4 for them too, best kept, "
         "uncapped then terms reread on spills left | fatbin sass+ptx")
# The columns read from the machine code, raw counts only (the model derives rates from them:
# strassenbench.model.issue.issue_fractions); empty where the disassembler does not read the architecture (sm_70).
SASS_COLUMNS = [*OPCODE_COLUMNS, *MAINLOOP_COLUMNS]
SUPPORTED_ARCHS = tuple(ARCHS)


class BuildError(RuntimeError):
    """The kernels did not compile, or a requested architecture is not supported."""


@dataclass
class Props:
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    smem_bytes: int = 0
    stack_bytes: int = 0


def parse_ptxas(log: str) -> dict[str, Props]:
    """Per-function resources from ``ptxas -v`` output."""
    props: dict[str, Props] = {}
    current: Props | None = None
    for line in log.splitlines():
        if m := re.search(r"Function properties for (\w+)", line):
            current = props.setdefault(m.group(1), Props())
        elif current is None:
            continue
        elif m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
        elif m := re.search(r"Used (\d+) registers", line):
            current.registers = int(m.group(1))
            smem = re.search(r"(\d+) bytes smem", line)
            current.smem_bytes = int(smem.group(1)) if smem else 0
    return props


def sass_counts(sass: str) -> dict[str, Counter]:
    """Per-function opcode classes from ``cuobjdump --dump-sass`` (see strassenbench.fused.sass.opcode_counts)."""
    return {name: opcode_counts(code) for name, code in parse_sass(sass).items()}


def blocks_row(kernel: str, arch: str, source: str, strategy: str, dtype: str, counts: tuple[int, int, int],
               write_mode: str, loads: str, p: Props, ops: Counter, loop: dict, mode: str = "simt",
               threads: int | None = None) -> dict:
    """One resources.csv row: ptxas's figures, occupancy, opcode classes and the main loop's figures, each a
    count read from the compiler's output. ``mode``: simt, or the tensor-core mode (1xtf32, 3xtf32) of a
    tensor-core kernel; ``threads`` those of a block when ``strategy`` is not one of ours (a CUTLASS tile)."""
    threads = threads or ALL_STRATEGIES[strategy].threads
    return {
        "kernel": kernel, "arch": arch, "source": source, "strategy": strategy, "dtype": dtype, "mode": mode,
        "W_A": counts[0], "W_B": counts[1], "W_C": counts[2], "write_mode": write_mode, "loads": loads,
        "registers": p.registers, "spill_stores": p.spill_stores, "spill_loads": p.spill_loads,
        "smem_bytes": p.smem_bytes, "stack_bytes": p.stack_bytes,
        "blocks_per_sm": blocks_per_sm(ARCHS[arch], threads, p.registers, p.smem_bytes),
        **{col: ops.get(col, 0) for col in OPCODE_COLUMNS},
        **loop,
    }


@lru_cache(maxsize=None)
def toolchain_for(arch: str, driver: tuple[int, int] | None = None, jit: bool | None = None) -> Toolchain:
    """The toolchain that builds (and, on load, checks) ``arch``: strassenbench.fused.toolchain.choose for
    ``driver`` (default: the CUDA version this machine's driver runs, any without a driver). ``jit`` (default:
    whether this machine's GPU is newer than every build and runs ``arch``'s PTX) asks for a toolchain no newer
    than the driver, whose JIT compiler must read the PTX."""
    if jit is None:
        jit = driver is None and _local_gpu_jits(arch)
    return choose(arch, driver if driver is not None else driver_cuda(), toolchains(), jit)


def _local_gpu_jits(arch: str) -> bool:
    """This machine's GPU (NVML) runs ``arch``'s PTX only: its compute capability is newer than every build."""
    from ..device import gpu_arch

    local = gpu_arch()
    if local is None:
        return False
    capability = local.removeprefix("sm_")
    return jit_only(capability) and build_arch(capability) == arch


def unit_digest(text: str, arch: str, toolchain: Toolchain) -> str:
    return sources_digest(text, toolchain.name, FLAGS, arch)


def disassemble(cubin: Path, arch: str) -> str | None:
    """``cuobjdump --dump-sass``; None for an architecture CUDA 13's disassembler no longer reads (sm_70)."""
    sass = run_tool([find_tool("cuobjdump"), "--dump-sass", str(cubin)])
    if sass.returncode != 0:
        if int(arch.removeprefix("sm_").rstrip("a")) < 75:
            return None
        detail = (sass.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"cuobjdump --dump-sass failed: {detail} (pip install nvidia-cuda-nvdisasm)")
    return sass.stdout


def compile_module(toolchain: Toolchain, arch: str, source: Path, include_dirs: list[Path], out: Path,
                   name: str, ptxas_options: tuple[str, ...] = (), ptx: Path | None = None) -> tuple[str, str | None]:
    """``source`` to ``out/<name>.ptx``, ``<name>.cubin`` (ptxas, with ``ptxas_options``) and ``<name>.fatbin``
    (both, what the GPU loads); (ptxas's report, the cubin's SASS or None). With ``ptx`` (an earlier compile's
    PTX of the same source) the front end is not run again: ptxas assembles that PTX. A failure leaves
    ``<name>.log`` and raises BuildError."""
    log = out / f"{name}.log"
    # the tools write into a folder of this compile's own, made exclusively: never through a planted link
    private = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=out))
    try:
        return _compile_into(toolchain, arch, source, include_dirs, out, name, ptxas_options, private, log, ptx)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _compile_into(toolchain: Toolchain, arch: str, source: Path, include_dirs: list[Path], out: Path, name: str,
                  ptxas_options: tuple[str, ...], private: Path, log: Path,
                  earlier: Path | None) -> tuple[str, str | None]:
    ptx, cubin, fatbin = (private / f"{name}{ext}" for ext in (".ptx", ".cubin", ".fatbin"))
    try:
        if earlier is None:
            toolchain.ptx(source, arch, include_dirs, ptx)
        else:
            shutil.copyfile(earlier, ptx)
        report = toolchain.assemble(ptx, arch, cubin, ptxas_options)
    except ToolKilled as err:  # stopped, not failed: no log to leave
        raise BuildError(f"{toolchain.name} for {name}: {err}") from None
    except ToolchainError as err:
        log.write_text(str(err))
        raise BuildError(f"{toolchain.name} failed for {name}: {err} (log: {log})") from None
    sm = arch.removeprefix("sm_")
    packed = run_tool([find_tool("fatbinary"), f"--create={fatbin}", f"--image3=kind=elf,sm={sm},file={cubin}",
                       f"--image3=kind=ptx,sm={sm},file={ptx}"])
    if packed.returncode != 0:
        raise BuildError(f"fatbinary failed for {name}: {first_error(packed.stdout + packed.stderr)}")
    log.unlink(missing_ok=True)  # a stale failure log goes with a successful build
    sass = disassemble(cubin, arch)
    for tmp, ext in ((ptx, ".ptx"), (cubin, ".cubin"), (fatbin, ".fatbin")):
        tmp.replace(out / f"{name}{ext}")
    return report, sass



def unit_fresh(out: Path, unit: str, arch: str, driver: tuple[int, int] | None = None) -> bool:
    """The unit's files are all there and its stamp matches the sources it was built from and the present
    kernels, the toolchain this machine uses for arch (toolchain_for), and the flags."""
    source, table, index, stamp = (out / f"{unit}{ext}" for ext in (".cu", ".csv", ".json", ".stamp"))
    if not all(p.is_file() for p in (source, table, index, stamp)):
        return False
    if stamp.read_text() != unit_digest(source.read_text(), arch, toolchain_for(arch, driver)):
        return False
    with table.open(encoding="utf-8") as rows:  # a table of an older layout is made again
        if rows.readline().strip().split(",") != RESOURCE_COLUMNS:
            return False
    return all((out / module).is_file() for module in json.loads(index.read_text()).values())


# The modules a unit's build writes besides <unit>.fatbin (strassenbench.fused.build._build_unit): its kernels
# assembled at a register-usage level (_rul<level>), compiled from another source variant (_flight<f>, then
# perhaps _rul<level>), without the register cap (_uncapped) or with their terms reread (_reread).
_MODULE_SUFFIXES = re.compile(r"(_(?:rul\d+|flight\d+|uncapped|reread))+$")


def unit_of(module_file: str) -> str:
    """The unit a module file of a build belongs to, whose stamp says whether it is fresh."""
    return _MODULE_SUFFIXES.sub("", module_file.removesuffix(".fatbin"))


def built_by(out: Path, unit: str) -> str:
    """The toolchain a unit was built with (its ``.toolchain`` file), for messages."""
    path = out / f"{unit}.toolchain"
    return path.read_text().strip() if path.is_file() else "an unknown toolchain"

