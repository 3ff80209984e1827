"""The report's figure captions, written from what each figure shows (figures.Drawn) and held to it
(figures.check_caption)."""

from __future__ import annotations

from ..impls import get_impl
from ..sweeps import MODEL_SQUARE_STRATEGIES
from .figures import Drawn
from .figures_clock import CAPPED
from .figures_model import LEFT_OUT

__all__ = ["algorithms_caption", "clock_square_caption", "dmma_square_caption",
           "intro_comparison_caption", "issue_bounds_caption", "memlimit_caption", "model_square_caption",
           "model_sweeps_caption", "stra_square_caption", "stra_square_more_caption", "tensorcore_square_caption",
           "wgmma_square_caption", "winners_caption"]


def listed(labels: list[str]) -> str:
    return f" Lines: {'; '.join(labels)}." if labels else ""


def _peak(text: str, drawn: Drawn, words: str = " The dotted line is the GPU's FP32 peak.") -> str:
    return text + words if "peak" in drawn.marks else text


def stra_square_caption(drawn: Drawn, context: dict) -> str:
    text = _peak("Figure fig:stra_square as the paper draws it: effective TFLOPS (2mnk / time, float32, median time "
                 "per point) of the paper's six implementations over its three sweeps: square, rank-k (k fixed), "
                 "panel (m = n fixed).", drawn)
    return text + (f" Not timed in this run: {context['missing']}." if context["missing"] else "")


def stra_square_more_caption(drawn: Drawn, context: dict) -> str:
    return _peak("The implementations this run timed beyond the paper's figure (our GEMM, direct 2-level Strassen, "
                 "other algorithms), with cuBLAS as the yardstick, on fig:stra_square's axes.", drawn)


def intro_comparison_caption(drawn: Drawn, context: dict) -> str:
    text = ("Figure fig:intro_comparison: effective TFLOPS of our 1-level Strassen, of the workspace-based "
            "1-level reference (the state of the art the paper sets it against, Lai et al.'s, re-implemented "
            "over cuBLAS in reference/) and of cuBLAS on square problems.")
    if "break-even" in drawn.marks:
        return text + (" Vertical marks: the break-even with cuBLAS, the smallest size from which an implementation "
                       "is faster at every larger size (paper, V100: 1,536 ours, 7,168 the reference).")
    return text + " Neither Strassen implementation stays faster than cuBLAS up to the largest size of this run."


def model_square_caption(drawn: Drawn, context: dict) -> str:
    solid = "measured (solid)" if drawn.solid else ""
    dashed = "the model's prediction (dashed)" if drawn.dashed else ""
    dotted = ("the model's with global traffic through the L2 (dotted: model l2, the optimistic side; what the paper's "
              "Sec. s:perf_discuss, 'Cache effects', finds its model missing for the Small strategy)")
    dotted = dotted if drawn.dotted else ""
    parts = ", ".join(p for p in (solid, dashed, dotted) if p) or "nothing"
    text = ("Figure fig:model_square: GEMM and direct 1- and 2-level Strassen (their 1, 7 or 49 products one "
            f"after another, without task parallelism) with the {' and '.join(MODEL_SQUARE_STRATEGIES)} strategies: "
            f"{parts}, Sec. "
            f"s:perf_predict, for {context['model']}. The paper draws both strategies in one plot with CUTLASS as "
            "the GEMM; here each strategy has its panel, and CUTLASS is measured in the Huge one only: CUTLASS "
            "4.2's SIMT GEMM does not compile for the Small strategy's 16 x 16 x 16 thread block (its epilogue "
            "rejects the tile), so our GEMM stands for it.")
    if not drawn.solid:
        text += " No measurement with these strategies in this run (they are timed on GPU runs)."
    return text


def _schemes(drawn: Drawn) -> str:
    """How the predictions' fused products ran (the figure's "scheme" marks): a clause of the caption."""
    schemes = sorted({label.lstrip("_") for label in drawn.marks.get("scheme", [])})
    if schemes and schemes != ["sequential"]:
        return (f", the fused products run by the {' and '.join(schemes)} scheme{'s' if len(schemes) > 1 else ''} "
                "(paper, Sec. s:task; the paper's model knows only the products one after another, sequential)")
    return ", the fused products one after another (sequential)"


def model_sweeps_caption(drawn: Drawn, context: dict) -> str:
    if not drawn.dashed:
        return ("The model's curves of the paper's three sweeps: no predictions in this run's folder "
                "(`strassenbench model predict` writes them).")
    return (f"The model's predictions (dashed) for {context['model']} on the paper's three sweeps{_schemes(drawn)}; "
            "predictions only, the crossovers are in the model crossover table.")


def issue_bounds_caption(drawn: Drawn, context: dict) -> str:
    if "ideal" not in drawn.marks:
        return ("Per GPU model, the speedup bounds by the paper's model and by issue slots: none in this run's "
                "folder (`strassenbench model issue-bounds` writes them).")
    return ("Per GPU model, each Strassen implementation's speedup over our GEMM at the largest square size "
            "(Huge, float32), predicted by the paper's model (T_flop, T_gmop, T_smop: plain bars) and by issue "
            "slots alone (T_issue, hatched): on an H100 every instruction of the main loop that is not an "
            "FFMA takes an FFMA's slot, on V100 and A100 one per FFMA issues free. The main loops' "
            "instructions come from the kernel build's resource table where it read that architecture's machine "
            "code, else from counting the loop's work (sm_70). Dotted: the ideal 8/7 and (8/7)^2.")


def algorithms_caption(drawn: Drawn, context: dict) -> str:
    dashed = "the model's prediction (dashed)" if drawn.dashed else ""
    return ("Which algorithm wins per shape (square, rank-k, panel): each algorithm's speedup over our fused "
            f"GEMM, as {dashed or 'the model predicts it'}"
            + (" and as measured (solid) on this run's GPU" if drawn.solid else "")
            + "; above 1 the algorithm wins. The algorithms table has their error growth and measured errors."
            + (f" Left out, as this GPU cannot run them (no TF32 tensor cores): {', '.join(dict.fromkeys(x.lstrip('_') for x in left))}."
               if (left := drawn.marks.get("left out")) else ""))


def winners_caption(drawn: Drawn, context: dict) -> str:
    shown = [name for name in ("float32", "3xTF32", "1xTF32") if any(f"model, {name} winners" == x for x in drawn.lines)]
    text = ("Which implementation wins at each size of the three sweeps (rank-k with k = 4,096, panel with m = n = "
            f"8,192): pick's first by {context['model']}{_schemes(drawn)}, its speedup over cuBLAS, each point in its "
            "winner's colour, every algorithm of the catalogue at one and two levels among the candidates.")
    if shown:
        text += f" Precision modes: {', '.join(shown)}; the model predicts cuBLAS and CUTLASS as our GEMM."
    if shown == ["float32"]:
        text += " The tensor-core modes are left out: this GPU has no TF32 tensor cores."
    if any("(measured" in x for x in drawn.lines):
        text += " Hollow markers: the fastest implementation this run measured in full float32, over measured cuBLAS."
    return text


def tensorcore_square_caption(drawn: Drawn, context: dict) -> str:
    cutlass = get_impl("cutlass-3xtf32").label
    with_cutlass = (f" {cutlass}: CUTLASS's 3xTF32 SGEMM (its own kernel, 3-stage cp.async pipeline), the "
                    "yardstick of ours in 3xTF32." if any(line.startswith(cutlass) for line in drawn.lines) else "")
    return _peak("Beyond the paper: effective TFLOPS (float32, median time per point) of the square sweep's SIMT "
                 "FP32 implementations beside their TF32 tensor-core counterparts: cuBLAS with "
                 "CUBLAS_COMPUTE_32F_FAST_TF32, and our fused GEMM and Strassen kernels in 1xTF32 (operands and "
                 "operand sums rounded to TF32) and 3xTF32 (split into two TF32 parts, three products: FP32-level "
                 "accuracy, see the tensorcore accuracy table)." + with_cutlass, drawn,
                 " Dotted: the GPU's FP32 and dense TF32 peaks.")


def wgmma_square_caption(drawn: Drawn, context: dict) -> str:
    return _peak("Beyond the paper: effective TFLOPS (float32, median time per point) of the square sweep on Hopper's "
                 "warpgroup tensor cores (wgmma, sm_90a): our warp-specialized, persistent GEMM and fused Strassen "
                 "kernels (TMA loads, the operand sums formed by a loader warpgroup) in 1xTF32 and 3xTF32 (FP32-level "
                 "accuracy, see the tensorcore accuracy table), beside cuBLAS SGEMM and TF32 and CUTLASS's sm_90 TF32 "
                 "and 3xTF32 GEMMs, each where the run timed it.", drawn,
                 " Dotted: the GPU's FP32 and dense TF32 peaks.")


def dmma_square_caption(drawn: Drawn, context: dict) -> str:
    return _peak("Beyond the paper: effective TFLOPS (float64, median time per point) of the square sweep in double "
                 "precision: cuBLAS's DGEMM (on an A100 or H100 it runs on the FP64 tensor cores), our SIMT GEMM, "
                 "and on the FP64 tensor cores (mma.m8n8k4.f64) CUTLASS's DGEMM and our fused GEMM and 1- and "
                 "2-level Strassen, the operand sums formed in the tile loads as in single precision.", drawn,
                 " Dotted: the GPU's FP64 and FP64 tensor peaks.")


def clock_square_caption(drawn: Drawn, context: dict) -> str:
    if left := drawn.marks.get(LEFT_OUT):
        return f"Per-clock TFLOPS of the square sweep: left out, as {left[0].lstrip('_')}."
    text = ("Beyond the paper: the square sweep's effective TFLOPS (float32, median time per point) as measured "
            "(left) and per clock (right): TFLOPS x the GPU's maximum SM clock / the point's median SM clock, what "
            "the point would reach if its time scaled with the clock. Per-clock figures are a diagnosis of how much "
            "of a difference the clock explains, not an achievable speedup: a GPU under its power cap does not "
            "hold its maximum clock.")
    if CAPPED in drawn.marks:
        text += (" Circled: power-capped points (half their samples or more under a power or thermal cap; in "
                 "files from before that count, NVML's software power cap or power brake set as the point ended).")
    return text


def memlimit_caption(drawn: Drawn, context: dict) -> str:
    text = ("The largest square problem each implementation can run in the free memory (the paper: 36,000 for "
            "our 1-level Strassen, 22,500 for the 1-level reference, on a 16 GB V100).")
    if "confirmed" in drawn.marks:
        text += " Full bars were confirmed by running at n and running out of memory at n + step."
    if "not confirmed" in drawn.marks:
        text += " Hatched bars are the memory formula's, not confirmed by a run."
    return text
