"""`strassenbench build` (compile the fused kernels) and `strassenbench doctor` (is this machine ready)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..fused.build import SUPPORTED_ARCHS
from ..gemm import DTYPES
from ..families import ALL_STRATEGIES, FAMILIES
from . import types
from .checks import EXIT_USAGE

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="is this machine ready to measure: GPU, driver, CuPy, libraries, build "
                                       "arch and toolchain (exit 2 naming the fix at the first problem)")
    p.add_argument("--arch", action="store_true", help="print only the build the GPU runs (sm_70, sm_80, sm_90)")
    p.set_defaults(func=run)

    p = sub.add_parser("build", help="compile the fused kernels (nvcc or NVRTC, then ptxas); write fatbins "
                                      "(SASS and PTX) and resources.csv")
    p.add_argument("--arch", action="append", choices=SUPPORTED_ARCHS, required=True,
                   help="repeat: sm_70 (needs the cu12 extra), sm_80, sm_90")
    p.add_argument("--driver-cuda", type=types.cuda_version, metavar="X.Y",
                   help="the CUDA version the GPU's driver runs (nvidia-smi's 'CUDA Version'); picks the "
                        "toolchain. Default: this machine's driver, or the newest toolchain without one")
    p.add_argument("--out", default="build", metavar="DIR")
    p.add_argument("--dtype", action="append", choices=DTYPES, help="repeat; default: all")
    p.add_argument("--strategy", action="append", type=types.any_case(list(ALL_STRATEGIES)),
                   choices=list(ALL_STRATEGIES),
                   help="repeat; default: the paper's six (the tensor-core families' "
                        f"{', '.join(s for f in FAMILIES.values() if f.tensor for s in f.strategies)}, sm_80 and "
                        "later, when named)")
    p.add_argument("--counts", action="append", type=types.counts, metavar="AxBxC",
                   help="repeat: W_A x W_B x W_C of the kernels to build, powers of two (default: the GEMM 1x1x1 "
                        "and every variant of 1- and 2-level Strassen)")
    p.add_argument("--plan", action="append", type=types.plan, metavar="ALGORITHM:L",
                   help="repeat: also the kernels that L levels of ALGORITHM run on, e.g. grey322-11-50:1")
    p.add_argument("--presum", action="store_true",
                   help="also the kernels the presum scheme runs (strassen1-presum, ...): one term of A and of B, "
                        "for 1- and 2-level Strassen and every --plan")
    p.add_argument("--force", action="store_true", help="recompile even when the stamp is unchanged")
    p.add_argument("--cutlass", action=argparse.BooleanOptionalAction, default=None,
                   help="also build the CUTLASS baseline (default: when float32 Huge is built)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return _build(args) if args.command == "build" else _doctor(args)


def _build(args: argparse.Namespace) -> int:
    from ..fused.build import build, check_counts, toolchain_for
    from ..fused.instances import FUSED_ALGORITHM, FUSED_LEVELS, operand_counts, plan_counts, presum_counts

    def report(what: str, rebuilt: bool | None) -> None:
        state = "" if rebuilt is None else f": {'compiled' if rebuilt else 'up to date'}"
        print(f"strassenbench: {what}{state}", file=sys.stderr)

    dtypes = tuple(args.dtype or DTYPES)
    strategies = tuple(args.strategy) if args.strategy else None
    counts = tuple(dict.fromkeys(args.counts)) if args.counts else None
    check_counts(counts, dtypes)  # before anything is printed: a bad request is one line
    if args.plan:  # the plans' kernels beside those asked for (default: the GEMM and Strassen's)
        planned = [c for spec, levels in args.plan for c in plan_counts(spec, levels)]
        counts = tuple(dict.fromkeys([*(counts or operand_counts()), *planned]))
    if args.presum:  # and those the presum scheme runs the same plans on
        plans = [*((FUSED_ALGORITHM, levels) for levels in FUSED_LEVELS), *(args.plan or [])]
        summed = [c for spec, levels in plans for c in presum_counts(spec, levels)]
        counts = tuple(dict.fromkeys([*(counts or operand_counts()), *summed]))
    for arch in args.arch:  # so is an architecture no toolchain here builds for this driver
        toolchain_for(arch, args.driver_cuda)
    print(f"strassenbench: building {', '.join(args.arch)} into {args.out} (minutes per arch)", file=sys.stderr)
    table = build(args.arch, Path(args.out), dtypes=dtypes, strategies=strategies, counts=counts,
                  force=args.force, cutlass=args.cutlass, driver=args.driver_cuda, progress=report)
    spills = table[(table["spill_stores"] > 0) | (table["spill_loads"] > 0)]
    print(f"strassenbench: {len(table)} kernels, {len(spills)} with spills; resources in "
          f"{Path(args.out) / 'resources.csv'}", file=sys.stderr)
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from ..doctor import Failed, diagnose

    try:
        for check, finding in diagnose():
            if args.arch:
                if check == "arch":
                    print(finding)
            else:
                print(f"ok  {check}: {finding}")
    except Failed as err:
        print(f"strassenbench: doctor: {err}", file=sys.stderr)
        return EXIT_USAGE
    return 0
