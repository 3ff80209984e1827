"""One colour and one marker per implementation, the same in every figure of the report and of `compare`; a
model's dashed line takes the colour of its implementation's measured line."""

from __future__ import annotations

import zlib

__all__ = ["PAPER_LINES", "INTRO_LINES", "TENSORCORE_LINES", "DMMA_LINES", "WGMMA_LINES", "style"]

# The six lines of the paper's figure fig:stra_square, in its legend's order.
PAPER_LINES = ("cutlass", "cublas", "strassen1", "strassen1-ref", "strassen2-hybrid", "strassen2-ref")
# Figure fig:intro_comparison: our 1-level Strassen, the state of the art it is set against (Lai et al.'s
# workspace-based Strassen over cuBLAS, which reference/ re-implements) and cuBLAS.
INTRO_LINES = ("cublas", "strassen1", "strassen1-ref")

_FIXED = {
    "cutlass": ("#1f77b4", "s"),
    "cublas": ("#ff7f0e", "o"),
    "strassen1": ("#d62728", "^"),
    "strassen1-ref": ("#9467bd", "v"),
    "strassen2-hybrid": ("#2ca02c", "D"),
    "strassen2-ref": ("#8c564b", "P"),
    "gemm": ("#17becf", "X"),
    "strassen2-direct": ("#bcbd22", "*"),
    # Beyond the paper: the tensor-core implementations (darker kin of their SIMT counterparts' colours).
    "cublas-tf32": ("#a65628", "o"),
    "cutlass-3xtf32": ("#253494", "s"),
    "gemm-tf32": ("#0b6e79", "X"),
    "gemm-3xtf32": ("#084c61", "X"),
    "strassen1-tf32": ("#f781bf", "^"),
    "strassen1-3xtf32": ("#8b0000", "^"),
    "strassen2-tf32": ("#dede00", "*"),
    "strassen2-3xtf32": ("#6b6b00", "*"),
    # and on the FP64 tensor cores (float64).
    "cutlass-dmma": ("#4d4d4d", "s"),
    "gemm-dmma": ("#2c7fb8", "X"),
    "strassen1-dmma": ("#d95f0e", "^"),
    "strassen2-dmma": ("#31a354", "*"),
    # and on Hopper's wgmma (sm_90a).
    "cutlass-tf32-sm90": ("#762a83", "s"),
    "gemm-tf32-wgmma": ("#1b7837", "X"),
    "gemm-3xtf32-wgmma": ("#00441b", "X"),
    "strassen1-tf32-wgmma": ("#de77ae", "^"),
    "strassen1-3xtf32-wgmma": ("#c51b7d", "^"),
    "strassen2-tf32-wgmma": ("#fdb863", "*"),
    "strassen2-3xtf32-wgmma": ("#b35806", "*"),
}
# Figure fig_tensorcore_square: the SIMT FP32 lines and their tensor-core counterparts, CUTLASS's 3xTF32 SGEMM
# (the yardstick of ours in 3xTF32) among them.
TENSORCORE_LINES = ("cublas", "gemm", "strassen1", "strassen2-direct", "cublas-tf32", "cutlass-3xtf32", "gemm-tf32",
                    "gemm-3xtf32", "strassen1-tf32", "strassen1-3xtf32", "strassen2-tf32", "strassen2-3xtf32")
# Figure fig_wgmma_square: the wgmma implementations (sm_90a) beside cuBLAS SGEMM and TF32, CUTLASS's sm_90
# TF32 and its (mma.sync) 3xTF32 GEMM, and our mma.sync 3xTF32 GEMM.
WGMMA_LINES = ("cublas", "cublas-tf32", "cutlass-3xtf32", "cutlass-tf32-sm90", "gemm-3xtf32", "gemm-tf32-wgmma",
               "gemm-3xtf32-wgmma", "strassen1-tf32-wgmma", "strassen1-3xtf32-wgmma", "strassen2-tf32-wgmma",
               "strassen2-3xtf32-wgmma")
# Figure fig_dmma_square: float64, the SIMT lines and the FP64 tensor-core ones.
DMMA_LINES = ("cublas", "gemm", "cutlass-dmma", "gemm-dmma", "strassen1-dmma", "strassen2-dmma")
# Implementations of other algorithms (grey322-11-50x1, mixed specs): a colour and marker chosen from their
# name, so that a name keeps them from run to run and figure to figure.
_MORE_COLOURS = ("#e377c2", "#7f7f7f", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")
_MORE_MARKERS = ("p", "h", "<", ">", "d", "8", "H", "o")


def style(impl: str) -> dict[str, str]:
    """matplotlib's ``color`` and ``marker`` of an implementation."""
    if impl in _FIXED:
        color, marker = _FIXED[impl]
    else:
        h = zlib.crc32(impl.encode())
        color, marker = _MORE_COLOURS[h % len(_MORE_COLOURS)], _MORE_MARKERS[(h // 8) % len(_MORE_MARKERS)]
    return {"color": color, "marker": marker}
