"""Blocking parameter bounds (paper, Sec. s:blocking_choose and s:perf_discuss).

Large-k (asymptotic) forms, square blocks m_S = n_S = s and m_R = n_R = r, for operand counts (W_A, W_B):

  global bandwidth, Eq. (constrain_glb):  N_flop / N_gmop -> 2 s / (W_A + W_B) >= sizeof tau_flop / tau_gmop
                                          so s >= (W_A + W_B) / 2 * sizeof tau_flop / tau_gmop
  shared bandwidth, Eq. (constrain_sha_bdw): N_flop / N_smop -> s r / (s + r) -> r as s grows, so
                                          r >= sizeof tau_flop / tau_smop
  registers, Eq. (constrain_reg):         r^2 + (2 + W_A) r + (2 + W_B) r < 255 (+ W_A + W_B + 5, footnote)
  shared capacity, Eq. (constrain_sha_size): sizeof (m_S k_S + n_S k_S) <= shared memory per SM
  prefetch precondition, Eq. (constrain_sha_pre): k_S <= m_S / m_R and k_S <= n_S / n_R
  bandwidth a variant needs at a strategy: tau_gmop >= sizeof tau_flop N_gmop / N_flop (k -> infinity)
"""

from __future__ import annotations

import math

from ..algebra.primitives import variants
from ..strategies import STRATEGIES
from .gpus import GPUSpec
from .perf import ITEMSIZE, block_counts, registers

__all__ = ["bounds_rows", "LARGE_K"]

LARGE_K = 1 << 20  # an inner dimension large enough for the asymptotic forms


def _max_square_register_tile(w_a: int, w_b: int, limit: int, footnote: bool) -> float:
    """The real r at which r^2 + (4 + W_A + W_B) r (+ extra) reaches the register limit."""
    b = 4 + w_a + w_b
    c = (w_a + w_b + 5 if footnote else 0) - limit
    return (-b + math.sqrt(b * b - 4 * c)) / 2


def _variant_scopes() -> list[tuple[str, tuple[int, int, int]]]:
    scopes = [("GEMM", (1, 1, 1))]
    for levels in (1, 2):
        scopes += [(f"{levels}-level Var#{v.number}", (v.W_A, v.W_B, v.W_C)) for v in variants("strassen", levels)]
    return scopes


def bounds_rows(spec: GPUSpec, dtype: str = "float32") -> list[dict[str, object]]:
    """The bounds table: one row per (bound, scope), with the value, what it means and its source."""
    size = ITEMSIZE[dtype]
    rows: list[dict[str, object]] = []

    def add(bound: str, scope: str, value: float, unit: str, meaning: str, source: str, holds: str = "") -> None:
        rows.append({"bound": bound, "scope": scope, "value": round(value, 3), "unit": unit, "holds": holds,
                     "meaning": meaning, "source": source})

    flop_per_byte = spec.tau_flop(dtype) / spec.tau_gmop
    add("tau_flop", spec.name, spec.tau_flop(dtype) / 1e12, "TFLOPS", f"{dtype} peak", "Sec. s:volta")
    add("tau_gmop", spec.name, spec.tau_gmop / 1e12, "TB/s", "DRAM x 1.2 (read-only cache)", "Sec. s:blocking_choose")
    add("tau_smop", spec.name, spec.tau_smop / 1e12, "TB/s", "SMs x 32 banks x 4 B x clock", "Sec. s:blocking_choose")
    r_min = size * spec.tau_flop(dtype) / spec.tau_smop
    add("m_R = n_R >=", "all", r_min, "elements", "shared-memory bandwidth bound", "Eq. constrain_sha_bdw")
    for scope, (w_a, w_b, w_c) in _variant_scopes():
        add("m_S = n_S >=", scope, (w_a + w_b) / 2 * size * flop_per_byte, "elements",
            "global-bandwidth bound", "Eq. constrain_glb")
        add("m_R = n_R <", scope, _max_square_register_tile(w_a, w_b, 255, footnote=True), "elements",
            "register bound (with footnote registers)", "Eq. constrain_reg")
        huge = STRATEGIES["Huge"]
        add("registers (Huge)", scope, registers(huge, (w_a, w_b, w_c)), "per thread",
            "m_R n_R + (2 + W_A) m_R + (2 + W_B) n_R", "Eq. constrain_reg")
        counts = block_counts(huge, (w_a, w_b, w_c), LARGE_K)
        add("bandwidth needed (Huge)", scope, size * spec.tau_flop(dtype) * counts.n_gmop / counts.n_flop / 1e9,
            "GB/s", "global + texture throughput to stay compute bound", "Eq. constrain_glb, Sec. s:perf_discuss")
    for s in STRATEGIES.values():
        smem = s.smem_bytes(size)
        add("shared memory", s.name, smem, "bytes", f"A and B tiles; capacity {spec.limits.max_smem_per_sm:,} per SM",
            "Eq. constrain_sha_size", "yes" if smem < spec.limits.max_smem_per_sm else "no")
        # When k_S exceeds m_S / m_R, one prefetch register set cannot cover the tile and each thread
        # loads ceil(m_S k_S / (m_R t)) sub-columns per tile (CUTLASS's Small strategy does this).
        limit = min(s.m_S / s.m_R, s.n_S / s.n_R)
        add("prefetch k_S <=", s.name, limit, "elements",
            f"k_S = {s.k_S}" + ("" if s.k_S <= limit else f": {math.ceil(s.k_S / limit)} loads per thread per tile"),
            "Eq. constrain_sha_pre", "yes" if s.k_S <= limit else "no")
    return rows
