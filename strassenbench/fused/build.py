"""`strassenbench build`: compile the fused kernels with nvcc and report what the GPU compiler did.

One module per (architecture, dtype, strategy, W_A x W_B x W_C) holds those instantiations (build()): the
toolchain that strassenbench.fused.toolchain.choose() picks for the architecture and the driver compiles the
source to PTX and ptxas the PTX to a cubin; ``<unit>.fatbin`` carries both (the SASS a GPU of that
compute-capability major runs, the PTX a newer GPU compiles when the module loads).
``resources.csv`` has, per kernel and architecture,
ptxas's registers, spills, shared memory and stack (from ``-Xptxas -v``), blocks per SM from the occupancy
calculation of strassenbench.occupancy, instruction counts read from the machine code with
``cuobjdump --dump-sass`` (no GPU needed), and the main loop's figures per k_S slice (strassenbench.fused.sass:
instructions, FFMA share, global loads and how many are generic, how many instructions separate a global
load from the first instruction that waits for it, barriers). A build is skipped when its stamp (hash of every kernel source,
the generated instance list, the toolchain's version and flags) is unchanged.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import pandas as pd

from ..io import write_atomic
from ..occupancy import ARCHS, blocks_per_sm
from ..strategies import STRATEGIES
from .instances import (PARAM_BYTES, Instance, instances, kernel_counts, kernels_dir, max_batch, operand_counts,
                        render, sources_digest)
from .sass import MAINLOOP_COLUMNS, mainloop_metrics, opcode_counts, parse_sass
from .toolchain import Toolchain, ToolchainError, choose, driver_cuda, find_tool, first_error, toolchains

__all__ = ["BuildError", "RESOURCE_COLUMNS", "SASS_COLUMNS", "FLAGS", "build", "check_counts", "parse_ptxas",
           "sass_counts", "toolchain_for", "unit_fresh"]

RESOURCE_COLUMNS = [
    "kernel", "arch", "source", "strategy", "dtype", "W_A", "W_B", "W_C", "write_mode", "loads", "registers",
    "spill_stores",
    "spill_loads", "smem_bytes", "stack_bytes", "blocks_per_sm", "ffma", "lds128", "lds_other", "ldg",
    "local_mem_ops", *MAINLOOP_COLUMNS,
]
# What the stamp records of the compile (strassenbench.fused.toolchain.Toolchain.ptx and .assemble).
FLAGS = "c++17 lineinfo | ptxas -O3 -lineinfo | fatbin sass+ptx"
# The columns read from the machine code; empty where the disassembler does not read the architecture (sm_70).
SASS_COLUMNS = ["ffma", "lds128", "lds_other", "ldg", "local_mem_ops", *MAINLOOP_COLUMNS]
SUPPORTED_ARCHS = tuple(ARCHS)


class BuildError(RuntimeError):
    """The kernels did not compile, or a requested architecture is not supported."""


@dataclass
class _Props:
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    smem_bytes: int = 0
    stack_bytes: int = 0


def parse_ptxas(log: str) -> dict[str, _Props]:
    """Per-function resources from ``ptxas -v`` output."""
    props: dict[str, _Props] = {}
    current: _Props | None = None
    for line in log.splitlines():
        if m := re.search(r"Function properties for (\w+)", line):
            current = props.setdefault(m.group(1), _Props())
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
               write_mode: str, loads: str, p: _Props, ops: Counter, loop: dict) -> dict:
    """One resources.csv row: ptxas's figures, occupancy, opcode classes and the main loop's figures."""
    return {
        "kernel": kernel, "arch": arch, "source": source, "strategy": strategy, "dtype": dtype,
        "W_A": counts[0], "W_B": counts[1], "W_C": counts[2], "write_mode": write_mode, "loads": loads,
        "registers": p.registers, "spill_stores": p.spill_stores, "spill_loads": p.spill_loads,
        "smem_bytes": p.smem_bytes, "stack_bytes": p.stack_bytes,
        "blocks_per_sm": blocks_per_sm(ARCHS[arch], STRATEGIES[strategy].threads, p.registers, p.smem_bytes),
        **{col: ops.get(col, 0) for col in ("ffma", "lds128", "lds_other", "ldg", "local_mem_ops")},
        **loop,
    }


def _rows(selected: tuple[Instance, ...], arch: str, props: dict[str, _Props], sass: str | None) -> list[dict]:
    """resources.csv rows; ``sass`` None: the machine code could not be read, its columns stay empty."""
    code = parse_sass(sass or "")
    rows = []
    for inst in selected:
        p = props.get(inst.name)
        if p is None:
            raise BuildError(f"ptxas reported nothing for {inst.name} on {arch}")
        instructions = code.get(inst.name, [])
        row = blocks_row(inst.name, arch, "strassenbench", inst.strategy.name, inst.dtype, inst.counts,
                         inst.write_mode, inst.loads, p, opcode_counts(instructions), mainloop_metrics(instructions))
        if sass is None:
            row.update(dict.fromkeys(SASS_COLUMNS))
        rows.append(row)
    return rows


def _unit_name(arch: str, inst: Instance) -> str:
    a, b, c = inst.counts
    return f"strassen_{arch}_{inst.dtype}_{inst.strategy.name.lower()}_w{a}x{b}x{c}"


@lru_cache(maxsize=None)
def toolchain_for(arch: str, driver: tuple[int, int] | None = None) -> Toolchain:
    """The toolchain that builds (and, on load, checks) ``arch``: strassenbench.fused.toolchain.choose for
    ``driver`` (default: the CUDA version this machine's driver runs, any without a driver)."""
    return choose(arch, driver if driver is not None else driver_cuda(), toolchains())


def _unit_digest(text: str, arch: str, toolchain: Toolchain) -> str:
    return sources_digest(text, toolchain.name, FLAGS, arch)


def _disassemble(cubin: Path, arch: str) -> str | None:
    """``cuobjdump --dump-sass``; None for an architecture CUDA 13's disassembler no longer reads (sm_70)."""
    sass = subprocess.run([find_tool("cuobjdump"), "--dump-sass", str(cubin)], capture_output=True, text=True,
                          check=False)
    if sass.returncode != 0:
        if int(arch.removeprefix("sm_")) < 75:
            return None
        detail = (sass.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"cuobjdump --dump-sass failed: {detail} (pip install nvidia-cuda-nvdisasm)")
    return sass.stdout


def compile_module(toolchain: Toolchain, arch: str, source: Path, include_dirs: list[Path], out: Path,
                   name: str) -> tuple[str, str | None]:
    """``source`` to ``out/<name>.ptx``, ``<name>.cubin`` (ptxas) and ``<name>.fatbin`` (both, what the GPU
    loads); (ptxas's report, the cubin's SASS or None). A failure leaves ``<name>.log`` and raises BuildError."""
    log = out / f"{name}.log"
    ptx, cubin, fatbin = (out / f".{name}{ext}.tmp" for ext in (".ptx", ".cubin", ".fatbin"))
    try:
        toolchain.ptx(source, arch, include_dirs, ptx)
        report = toolchain.assemble(ptx, arch, cubin)
    except ToolchainError as err:
        log.write_text(str(err))
        raise BuildError(f"{toolchain.name} failed for {name}: {err} (log: {log})") from None
    sm = arch.removeprefix("sm_")
    packed = subprocess.run([find_tool("fatbinary"), f"--create={fatbin}", f"--image3=kind=elf,sm={sm},file={cubin}",
                             f"--image3=kind=ptx,sm={sm},file={ptx}"], capture_output=True, text=True, check=False)
    if packed.returncode != 0:
        raise BuildError(f"fatbinary failed for {name}: {first_error(packed.stdout + packed.stderr)}")
    log.unlink(missing_ok=True)  # a stale failure log goes with a successful build
    sass = _disassemble(cubin, arch)
    for tmp, ext in ((ptx, ".ptx"), (cubin, ".cubin"), (fatbin, ".fatbin")):
        tmp.replace(out / f"{name}{ext}")
    return report, sass


def _compile(arch: str, name: str, selected: tuple[Instance, ...], out: Path, toolchain: Toolchain) -> list[dict]:
    """One translation unit into ``out/<name>.fatbin``; its resources rows."""
    source = out / f"{name}.cu"
    write_atomic(source, render(selected))
    report, sass = compile_module(toolchain, arch, source, [kernels_dir()], out, name)
    return _rows(selected, arch, parse_ptxas(report), sass)


def unit_fresh(out: Path, unit: str, arch: str, driver: tuple[int, int] | None = None) -> bool:
    """The unit's files are all there and its stamp matches the sources it was built from and the present
    kernels, the toolchain this machine uses for arch (toolchain_for), and the flags."""
    source, table, index, stamp = (out / f"{unit}{ext}" for ext in (".cu", ".csv", ".json", ".stamp"))
    if not all(p.is_file() for p in (source, table, index, stamp)):
        return False
    if stamp.read_text() != _unit_digest(source.read_text(), arch, toolchain_for(arch, driver)):
        return False
    return all((out / module).is_file() for module in json.loads(index.read_text()).values())


def built_by(out: Path, unit: str) -> str:
    """The toolchain a unit was built with (its ``.toolchain`` file), for messages."""
    path = out / f"{unit}.toolchain"
    return path.read_text().strip() if path.is_file() else "an unknown toolchain"


def _build_unit(arch: str, unit: str, selected: tuple[Instance, ...], out: Path, force: bool,
                driver: tuple[int, int] | None) -> bool:
    """Compile one translation unit (the kernels of one dtype, strategy and W_A x W_B x W_C) for arch, unless
    its stamp (hash of the kernel sources, its instance list, nvcc's version and flags) is unchanged. True when
    compiled.

    Register-capped kernels that spill under the cap (ptxas's report) are compiled again without it, into
    ``<unit>_uncapped.fatbin``: they get the registers they need (one block per SM fewer) rather than spill.
    ``<unit>.json`` maps each kernel to its module."""
    text = render(selected)
    if not force and (out / f"{unit}.cu").is_file() and (out / f"{unit}.cu").read_text() == text \
            and unit_fresh(out, unit, arch, driver):
        return False
    toolchain = toolchain_for(arch, driver)
    rows = _compile(arch, unit, selected, out, toolchain)
    index = {inst.name: f"{unit}.fatbin" for inst in selected}
    spilled = {r["kernel"] for r in rows if r["spill_stores"] or r["spill_loads"]}
    relaxed = tuple(replace(i, capped=False) for i in selected if i.name in spilled and i.min_blocks > 1)
    if relaxed:
        again = {r["kernel"]: r for r in _compile(arch, f"{unit}_uncapped", relaxed, out, toolchain)}
        rows = [again.get(r["kernel"], r) for r in rows]
        index.update({inst.name: f"{unit}_uncapped.fatbin" for inst in relaxed})
    else:
        for ext in (".ptx", ".cubin", ".fatbin"):
            (out / f"{unit}_uncapped{ext}").unlink(missing_ok=True)
    write_atomic(out / f"{unit}.csv", pd.DataFrame(rows, columns=RESOURCE_COLUMNS).to_csv(index=False))
    write_atomic(out / f"{unit}.json", json.dumps(index, indent=0, sort_keys=True))
    write_atomic(out / f"{unit}.toolchain", str(toolchain))
    write_atomic(out / f"{unit}.stamp", _unit_digest(text, arch, toolchain))
    return True


def _arch_index(out: Path, arch: str, driver: tuple[int, int] | None) -> dict[str, str]:
    """Every kernel of the fresh units in ``out`` for arch (this build's and earlier ones), to its module."""
    index: dict[str, str] = {}
    for unit_index in sorted(out.glob(f"strassen_{arch}_*.json")):
        unit = unit_index.stem
        if unit_fresh(out, unit, arch, driver):
            index.update(json.loads(unit_index.read_text()))
    return index


def check_counts(counts: tuple[tuple[int, int, int], ...] | None,
                 dtypes: tuple[str, ...] = ("float32", "float64")) -> None:
    """BuildError unless every W_A x W_B x W_C asked for is a kernel the template instantiates: each count a
    power of two (kernel_counts), and one product's terms within the kernel parameters in every dtype."""
    for c in counts or ():
        if kernel_counts(c) != tuple(c) or not all(max_batch(d, sum(c)) for d in dtypes):
            examples = ", ".join("x".join(map(str, k)) for k in operand_counts()[:4])
            raise BuildError(f"no fused kernel has W_A x W_B x W_C = {'x'.join(map(str, c))} (each a power of two, "
                             f"all terms of one product within {PARAM_BYTES} bytes of parameters; e.g. {examples})")


def build(
    archs: list[str],
    out: Path,
    *,
    dtypes: tuple[str, ...] = ("float32", "float64"),
    strategies: tuple[str, ...] | None = None,
    counts: tuple[tuple[int, int, int], ...] | None = None,
    force: bool = False,
    cutlass: bool | None = None,
    driver: tuple[int, int] | None = None,
    progress=None,  # noqa: ANN001 - callable(what, rebuilt) or None
) -> pd.DataFrame:
    """Build the fused kernels asked for into ``out``; return their resources table (also resources.csv).

    One module per (arch, dtype, strategy, W_A x W_B x W_C), ``strassen_<arch>_<dtype>_<strategy>_w<a>x<b>x<c>``,
    each compiled only when its stamp changed and all compiled in parallel (one compiler per core), so that
    asking for a subset compiles only that subset and an unchanged one nothing. ``strassen_<arch>.json`` maps
    every kernel of every fresh unit in ``out`` (this build's and earlier ones) to its fatbin;
    strassenbench.fused.cuda loads from it. ``counts`` limits the build to those operand counts (default: the
    GEMM and every variant). ``driver`` is the CUDA version the GPU's driver runs (default: this machine's);
    it and the architecture choose the toolchain (toolchain_for). ``cutlass`` (default: when float32 Huge is
    built) also builds the CUTLASS baseline (strassenbench.fused.cutlass), which needs an nvcc front end."""
    unknown = [a for a in archs if a not in SUPPORTED_ARCHS]
    if unknown:
        raise BuildError(f"unsupported arch {unknown[0]} (choose from {', '.join(SUPPORTED_ARCHS)})")
    check_counts(counts, dtypes)
    archs = list(dict.fromkeys(archs))
    chosen = {arch: toolchain_for(arch, driver) for arch in archs}  # ToolchainError before any work
    if progress:
        for arch, toolchain in chosen.items():
            progress(f"{arch} with {toolchain}", None)
    kwargs: dict = {"dtypes": dtypes, "counts": counts}
    if strategies is not None:
        kwargs["strategies"] = strategies
    groups: dict[tuple, list[Instance]] = {}
    for inst in instances(**kwargs):
        groups.setdefault((inst.dtype, inst.strategy.name, inst.counts), []).append(inst)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(arch, _unit_name(arch, g[0]), tuple(g)) for arch in archs for g in groups.values()]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = [pool.submit(_build_unit, arch, unit, group, out, force, driver) for arch, unit, group in jobs]
        for (_, unit, _), future in zip(jobs, futures):
            rebuilt = future.result()
            if progress:
                progress(unit, rebuilt)
    frames = [pd.read_csv(out / f"{unit}.csv") for _, unit, _ in jobs]
    for arch in archs:
        write_atomic(out / f"strassen_{arch}.json", json.dumps(_arch_index(out, arch, driver), indent=0, sort_keys=True))
    if cutlass if cutlass is not None else ("float32" in dtypes and (strategies is None or "Huge" in strategies)):
        from . import cutlass as baseline

        for arch in archs:
            built = baseline.build_arch(arch, out, chosen[arch], force)
            if built is None:
                if cutlass:
                    raise BuildError(f"the CUTLASS baseline needs nvcc; {chosen[arch].name} builds {arch} here "
                                     "(put a CUDA toolkit's bin/ on PATH, or build without --cutlass)")
                if progress:
                    progress(f"{arch} CUTLASS baseline: not built ({chosen[arch].name} has no nvcc)", None)
                continue
            row, rebuilt = built
            frames.append(pd.DataFrame([row]))
            if progress:
                progress(f"{arch} CUTLASS baseline", rebuilt)
    table = pd.concat(frames, ignore_index=True)[RESOURCE_COLUMNS]
    write_atomic(out / "resources.csv", table.to_csv(index=False))
    return table


__all__ += ["ToolchainError", "SUPPORTED_ARCHS"]
