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
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pandas as pd

from .. import env
from ..algebra.algorithm import AlgorithmError
from ..families import MODES
from ..io import write_atomic
from ..limits import LimitError
from .instances import (PARAM_BYTES, Instance, helper_kernels, instances, kernel_counts, kernels_dir, max_batch,
                        operand_counts, parse_instance, plan_counts, render)
from .modules import (FLAGS, RESOURCE_COLUMNS, SASS_COLUMNS, SUPPORTED_ARCHS, BuildError, Props, blocks_row,
                      built_by, compile_module, parse_ptxas, sass_counts, toolchain_for, unit_digest, unit_fresh)
from .sass import mainloop_metrics, opcode_counts, parse_sass
from .toolchain import Toolchain, ToolchainError, kill_tools

__all__ = ["plan_fits", "BuildError", "RESOURCE_COLUMNS", "SASS_COLUMNS", "FLAGS", "SUPPORTED_ARCHS", "ToolchainError", "build",
           "built_by", "check_counts", "parse_ptxas", "sass_counts", "toolchain_for", "unit_fresh"]


def _rows(selected: tuple[Instance, ...], arch: str, props: dict[str, Props], sass: str | None) -> list[dict]:
    """resources.csv rows; ``sass`` None: the machine code could not be read, its columns stay empty."""
    code = parse_sass(sass or "")
    rows = []
    for inst in selected:
        p = props.get(inst.name)
        if p is None:
            raise BuildError(f"ptxas reported nothing for {inst.name} on {arch}")
        instructions = code.get(inst.name, [])
        row = blocks_row(inst.name, arch, "strassenbench", inst.strategy.name, inst.dtype, inst.counts,
                         inst.write_mode, inst.loads, p, opcode_counts(instructions), mainloop_metrics(instructions),
                         inst.mode)
        if sass is None:
            row.update(dict.fromkeys(SASS_COLUMNS))
        rows.append(row)
    return rows


def _unit_name(arch: str, inst: Instance) -> str:
    a, b, c = inst.counts
    return f"strassen_{arch}_{inst.precision}_{inst.strategy.name.lower()}_w{a}x{b}x{c}"


def _compile(arch: str, name: str, selected: tuple[Instance, ...], out: Path, toolchain: Toolchain,
             ptxas_options: tuple[str, ...] = (), ptx_of: str | None = None) -> list[dict]:
    """One translation unit into ``out/<name>.fatbin``; its resources rows. ``ptx_of``: a module of this build
    whose PTX has every kernel of ``selected`` (built from the same source lines): ptxas assembles only those
    kernels of it (``--entry``), and the front end is not run again."""
    target = selected[0].family.target(arch)  # sm_90a for the wgmma family's units in sm_90's build
    if ptx_of is None:
        source = out / f"{name}.cu"
        write_atomic(source, render(selected))
        report, sass = compile_module(toolchain, target, source, [kernels_dir()], out, name, ptxas_options)
    else:
        entries = f"--entry={','.join(i.name for i in selected)}"
        report, sass = compile_module(toolchain, target, out / f"{ptx_of}.cu", [kernels_dir()], out, name,
                                      (*ptxas_options, entries), ptx=out / f"{ptx_of}.ptx")
    return _rows(selected, arch, parse_ptxas(report), sass)


# ptxas's --register-usage-level (default 5) tried, in this order, for a kernel that spills or issues a global
# load of its main loop late (_late, LOAD_AHEAD): lower levels keep fewer values live
# (4 first, the closest to the default; 0 the most conservative); 8, last, lets ptxas use registers more
# freely, which at the 255-register limit can keep a value that the lower levels spill. Each kernel keeps the
# level that scores best.
REGISTER_USAGE_LEVELS = (4, 0, 8)
# The FLIGHT values (kernels/mainloop.cuh: registers of raw loads in flight) compiled for the tuned kernels
# (_tuned) besides Instance.flight's default (16), each module assembled at every level too. On sm_90 with nvcc
# 13, 8 (two groups, by operand) suits most 1-level kernels and 4 (a group per term) the 2-level ones.
FLIGHTS = (8, 4)

# Instructions between a global load of the main loop and its first use that hide the load's latency: with 2
# blocks of 8 warps per SM, each sub-partition's 4 warps issue about 800 instructions meanwhile, more than a
# DRAM load's latency (some 600 clocks). The float32 vector kernels held to 2 blocks per SM (Huge) are built to
# reach it (mainloop.cuh); smaller tiles, whose slices are too short for it, are not compiled again for it.
LOAD_AHEAD = 200


def _spills(row: dict) -> bool:
    return bool(row["spill_stores"] or row["spill_loads"])


def _late(inst: Instance, row: dict) -> bool:
    """A float32 vector kernel held to 2 blocks per SM whose main loop uses a global load fewer than LOAD_AHEAD
    instructions after it was issued (unknown without the machine code: not late)."""
    lu = row["load_use_distance"]
    return (inst.dtype == "float32" and inst.loads == "vector" and inst.min_blocks > 1 and pd.notna(lu)
            and lu < LOAD_AHEAD)


def _score(inst: Instance, row: dict) -> tuple:
    """Smaller is better: no spills, then loads issued in time (_late), then fewer main-loop instructions per
    slice, then loads issued further ahead."""
    instructions, lu = row["loop_instructions"], row["load_use_distance"]
    return (_spills(row), _late(inst, row), instructions if pd.notna(instructions) else 0, -lu if pd.notna(lu) else 0)


def _drop_module(out: Path, name: str) -> None:
    for ext in (".cu", ".ptx", ".cubin", ".fatbin"):
        (out / f"{name}{ext}").unlink(missing_ok=True)



def _tuned(inst: Instance) -> bool:
    """A kernel whose machine code the build searches for (FLIGHTS, REGISTER_USAGE_LEVELS): the float32 SIMT vector
    kernels held to 2 blocks per SM (Huge). At their 128-register cap ptxas's main loop moves by about ten
    instructions a slice with any change of the source or of its options; each keeps the best it was given."""
    return inst.dtype == "float32" and inst.loads == "vector" and inst.min_blocks > 1 and "flight" in inst.family.fields


def _better(rows: list[dict], module: str, best: dict[str, dict], index: dict[str, str],
            by_name: dict[str, Instance]) -> None:
    """Each row of ``module`` that scores better than its kernel's best so far (_score) becomes its best."""
    for r in rows:
        if _score(by_name[r["kernel"]], r) < _score(by_name[r["kernel"]], best[r["kernel"]]):
            best[r["kernel"]] = r
            index[r["kernel"]] = f"{module}.fatbin"


def _retry_levels(arch: str, source: str, selected: tuple[Instance, ...], best: dict[str, dict],
                  index: dict[str, str], by_name: dict[str, Instance], out: Path, toolchain: Toolchain) -> set[str]:
    """The kernels of module ``source`` that spill, issue a load late (_late) or are tuned (_tuned) assembled again
    from its PTX at each of REGISTER_USAGE_LEVELS into ``<source>_rul<level>``, each kept where it scores better
    (_better); the modules compiled."""
    modules = set()
    for level in REGISTER_USAGE_LEVELS:
        name = f"{source}_rul{level}"
        retry = tuple(i for i in selected if _spills(best[i.name]) or _late(i, best[i.name]) or _tuned(i))
        if retry:
            try:
                again = _compile(arch, name, retry, out, toolchain, (f"--register-usage-level={level}",), ptx_of=source)
            except BuildError:  # a ptxas without the option: the uncapped build below
                again = []
            _better(again, name, best, index, by_name)
        modules.add(name)
    return modules


def _build_unit(arch: str, unit: str, selected: tuple[Instance, ...], out: Path, force: bool,
                driver: tuple[int, int] | None) -> bool:
    """Compile one translation unit (the kernels of one dtype, strategy and W_A x W_B x W_C) for arch, unless
    its stamp (hash of the kernel sources, its instance list, nvcc's version and flags) is unchanged. True when
    compiled.

    Kernels that spill (ptxas's report), float32 Huge vector kernels whose main loop issues a global load late
    (_late), and the tuned kernels (_tuned) are compiled again at other ptxas register-usage levels
    (REGISTER_USAGE_LEVELS, into ``<unit>_rul<level>.fatbin``); the tuned ones also with each of FLIGHTS
    (``<unit>_flight<f>.fatbin``, and its levels). Each kernel keeps its best build (_score). Register-capped
    ones that still spill are compiled without the cap, into ``<unit>_uncapped.fatbin``: they get the registers
    they need (one block per SM fewer) rather than spill; vector kernels that spill even so are compiled with
    their terms read afresh every slice (_reread_spilling). ``<unit>.json`` maps each kernel to its module."""
    text = render(selected)
    if not force and (out / f"{unit}.cu").is_file() and (out / f"{unit}.cu").read_text() == text \
            and unit_fresh(out, unit, arch, driver):
        return False
    toolchain = toolchain_for(arch, driver)
    rows = _compile(arch, unit, selected, out, toolchain)
    index = {name: f"{unit}.fatbin" for name in (*helper_kernels(selected), *(inst.name for inst in selected))}
    by_name = {inst.name: inst for inst in selected}
    best = {r["kernel"]: r for r in rows}
    kept = _retry_levels(arch, unit, selected, best, index, by_name, out, toolchain)
    for flight in FLIGHTS:  # the tuned kernels' other source variants, each at every level
        name, tuned = f"{unit}_flight{flight}", tuple(replace(i, flight=flight) for i in selected if _tuned(i))
        if tuned:
            _better(_compile(arch, name, tuned, out, toolchain), name, best, index, by_name)
            kept |= {name} | _retry_levels(arch, name, tuned, best, index, by_name, out, toolchain)
    for module in kept - {Path(v).stem for v in index.values()}:  # a module whose every kernel did better elsewhere
        _drop_module(out, module)
    rows = [best[r["kernel"]] for r in rows]
    relaxed = tuple(replace(i, capped=False) for i in selected if _spills(best[i.name]) and i.min_blocks > 1)
    if relaxed:
        again = {r["kernel"]: r for r in _compile(arch, f"{unit}_uncapped", relaxed, out, toolchain)}
        rows = [again.get(r["kernel"], r) for r in rows]
        index.update({inst.name: f"{unit}_uncapped.fatbin" for inst in relaxed})
        by_name.update({inst.name: inst for inst in relaxed})
    else:
        _drop_module(out, f"{unit}_uncapped")
    rows = _reread_spilling(arch, unit, rows, by_name, index, out, toolchain)
    write_atomic(out / f"{unit}.csv", pd.DataFrame(rows, columns=RESOURCE_COLUMNS).to_csv(index=False))
    write_atomic(out / f"{unit}.json", json.dumps(index, indent=0, sort_keys=True))
    write_atomic(out / f"{unit}.toolchain", str(toolchain))
    write_atomic(out / f"{unit}.stamp", unit_digest(text, arch, toolchain))
    return True


def _reread_spilling(arch: str, unit: str, rows: list[dict], by_name: dict[str, Instance], index: dict[str, str],
                     out: Path, toolchain: Toolchain) -> list[dict]:
    """SIMT vector kernels that still spill (at the 255-register limit: many terms, Sec. s:variants) compiled
    again with their terms read afresh every interior slice (``reread``, mainloop.cuh), into
    ``<unit>_reread.fatbin``; each keeps the better build (_score). The rows, with ``index`` updated."""
    name = f"{unit}_reread"
    retry = tuple(replace(by_name[r["kernel"]], reread=True) for r in rows
                  if _spills(r) and by_name[r["kernel"]].loads == "vector"
                  and "reread" in by_name[r["kernel"]].family.fields)
    again = {r["kernel"]: r for r in (_compile(arch, name, retry, out, toolchain) if retry else [])}
    current = {r["kernel"]: r for r in rows}
    better = {k: r for k, r in again.items() if _score(by_name[k], r) < _score(by_name[k], current[k])}
    index.update({k: f"{name}.fatbin" for k in better})
    if not better:
        _drop_module(out, name)
    return [better.get(r["kernel"], r) for r in rows]


def _arch_index(out: Path, arch: str, driver: tuple[int, int] | None) -> dict[str, str]:
    """Every kernel of the fresh units in ``out`` for arch (this build's and earlier ones), to its module."""
    index: dict[str, str] = {}
    for unit_index in sorted(out.glob(f"strassen_{arch}_*.json"), key=lambda p: (not _retargeted(p), p.name)):
        unit = unit_index.stem
        if unit_fresh(out, unit, arch, driver):
            index.update(json.loads(unit_index.read_text()))
    return index


def _retargeted(unit_index: Path) -> bool:
    """Whether a unit was compiled for another target than its build's (sm_90a: the wgmma family). Such units go
    first into the index, so that the helper kernels every module carries come from a plain unit where the build
    has one: in an sm_90a module every kernel's static shared memory is padded to the Wg tiles' 1 KiB alignment."""
    for kernel in json.loads(unit_index.read_text()):
        inst = parse_instance(kernel)
        if inst is not None:
            return bool(inst.family.arch_suffix)
    return False


def check_counts(counts: tuple[tuple[int, int, int], ...] | None,
                 dtypes: tuple[str, ...] = ("float32", "float64")) -> None:
    """BuildError unless every W_A x W_B x W_C asked for is a kernel the template instantiates: each count a
    power of two (kernel_counts), and one product's terms within the kernel parameters in every dtype."""
    for c in counts or ():
        if kernel_counts(c) != tuple(c) or not all(max_batch(d, sum(c)) for d in dtypes):
            examples = ", ".join("x".join(map(str, k)) for k in operand_counts()[:4])
            raise BuildError(f"no fused kernel has W_A x W_B x W_C = {'x'.join(map(str, c))} (each a power of two, "
                             f"all terms of one product within {PARAM_BYTES} bytes of parameters; e.g. {examples})")


@lru_cache(maxsize=None)
def plan_fits(spec: str, levels: int) -> bool:
    """Whether the fused kernels of ``levels`` levels of ``spec`` exist: within MAX_PRODUCTS products, and each
    product's terms (W_A x W_B x W_C, each rounded up to a power of two) within a launch's parameters
    (check_counts on plan_counts, which checks the products and needs the levels' nonzeros only, not the plan)."""
    try:
        check_counts(plan_counts(spec, levels))
    except (AlgorithmError, LimitError, BuildError):
        return False
    return True


def _jobs(archs: list[str], selected: list[Instance], progress) -> list[tuple[str, str, tuple[Instance, ...]]]:  # noqa: ANN001
    """(arch, unit, its instances) per module to build: one per (arch, precision, strategy, counts). A family's
    kernels build for its architectures only (strassenbench.families.Family.builds_for: from min_arch, to max_arch
    for wgmma's sm_90a): another architecture builds the others."""
    groups: dict[tuple, list[Instance]] = {}
    for inst in selected:
        groups.setdefault((inst.precision, inst.strategy.name, inst.counts), []).append(inst)

    def builds(arch: str, inst: Instance) -> bool:
        return inst.family.builds_for(arch)

    def needs(family) -> str:  # noqa: ANN001
        if family.max_arch == family.min_arch:
            return f"sm_{family.min_arch} only"
        return f"sm_{family.min_arch}" + (f" to sm_{family.max_arch}" if family.max_arch else " or later")

    for arch in archs:
        left = sorted({inst.family.hardware for inst in selected if not builds(arch, inst)})
        if left and not any(builds(arch, inst) for inst in selected):
            raise BuildError(f"the kernels on {left[0]} need {needs(selected[0].family)}, not {arch}")
        if left and progress:
            progress(f"{arch}: the kernels on {', '.join(left)} need another architecture, not built for it", None)
    return [(arch, _unit_name(arch, g[0]), tuple(g)) for arch in archs for g in groups.values() if builds(arch, g[0])]


def _compile_units(jobs: list, out: Path, force: bool, driver: tuple[int, int] | None, progress) -> None:  # noqa: ANN001
    """Build every job's unit, all in parallel (one compiler per core); on Ctrl-C or a failed unit, stop the
    queued compiles, kill the running ones and remove their half-written output."""
    pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    try:
        futures = [pool.submit(_build_unit, arch, unit, group, out, force, driver) for arch, unit, group in jobs]
        for (_, unit, _), future in zip(jobs, futures):
            rebuilt = future.result()
            if progress:
                progress(unit, rebuilt)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        kill_tools()
        for tmp in out.glob(".*.tmp"):  # a killed compile's half-written output (its private folder)
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
        raise
    pool.shutdown()


def _baselines(archs: list[str], out: Path, chosen: dict[str, Toolchain], force: bool, wanted: dict[str, bool],
               asked: bool, progress) -> list[pd.DataFrame]:  # noqa: ANN001
    """The CUTLASS baselines ``wanted`` (by mode; SIMT also when ``asked``) for each architecture they compile
    for: their resources rows. Without nvcc they are skipped, or refused when ``asked`` (--cutlass)."""
    from . import cutlass as baseline

    frames = []
    for (mode, spec), arch in ((item, arch) for item in baseline.BASELINES.items() for arch in archs):
        if not (wanted[mode] or (asked and not MODES[mode].tensor)) or not spec.builds_for(arch):
            continue
        built = baseline.build_baseline(arch, out, chosen[arch], force, spec)
        what = f"{arch} CUTLASS baseline{' ' + mode if MODES[mode].tensor else ''}"
        if built is None:
            if asked:
                raise BuildError(f"the CUTLASS baseline needs nvcc; {chosen[arch].name} builds {arch} here "
                                 "(put a CUDA toolkit's bin/ on PATH, or build without --cutlass)")
            if progress:
                progress(f"{what}: not built ({chosen[arch].name} has no nvcc)", None)
            continue
        row, rebuilt = built
        frames.append(pd.DataFrame([row]))
        if progress:
            progress(what, rebuilt)
    return frames


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
    it and the architecture choose the toolchain (toolchain_for). ``cutlass`` (default: when float32 Huge,
    a family's Family.cutlass_tile is built) also builds the family's CUTLASS baseline (strassenbench.fused.cutlass),
    which needs an nvcc front end."""
    unknown = [a for a in archs if a not in SUPPORTED_ARCHS]
    if unknown:
        raise BuildError(f"unsupported arch {unknown[0]} (choose from {', '.join(SUPPORTED_ARCHS)})")
    check_counts(counts, dtypes)
    env.seconds(env.COMPILE_TIMEOUT)  # a limit that cannot be used is refused before any work
    archs = list(dict.fromkeys(archs))
    chosen = {arch: toolchain_for(arch, driver) for arch in archs}  # ToolchainError before any work
    if progress:
        for arch, toolchain in chosen.items():
            progress(f"{arch} with {toolchain}", None)
    kwargs: dict = {"dtypes": dtypes, "counts": counts}
    if strategies is not None:
        kwargs["strategies"] = strategies
    selected = instances(**kwargs)
    jobs = _jobs(archs, selected, progress)
    out.mkdir(parents=True, exist_ok=True)
    # Each family's CUTLASS baseline beside our tile of its size (Family.cutlass_tile), in its dtype. Compiled
    # while the units are (one nvcc each, one after another), so that no core waits for them.
    from .cutlass import BASELINES

    wanted = {mode: any(inst.family is MODES[mode].kernel_family and inst.strategy.name == inst.family.cutlass_tile
                        and inst.dtype == spec.dtype for inst in selected) for mode, spec in BASELINES.items()}
    with ThreadPoolExecutor(max_workers=1) as side:
        baselines = side.submit(_baselines, archs, out, chosen, force, wanted, bool(cutlass), progress) \
            if (cutlass if cutlass is not None else any(wanted.values())) else None
        _compile_units(jobs, out, force, driver, progress)
        frames = [pd.read_csv(out / f"{unit}.csv") for _, unit, _ in jobs]
        for arch in archs:
            index = json.dumps(_arch_index(out, arch, driver), indent=0, sort_keys=True)
            write_atomic(out / f"strassen_{arch}.json", index)
        if baselines is not None:
            frames += baselines.result()
    table = pd.concat(frames, ignore_index=True)[RESOURCE_COLUMNS]
    write_atomic(out / "resources.csv", table.to_csv(index=False))
    return table

