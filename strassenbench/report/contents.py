"""What the report holds, by name: the package's one list of its figures and tables (the workflow's report rule
lists its outputs from it). Names only, nothing to import beyond them."""

from __future__ import annotations

__all__ = ["REPORT_FIGURES", "REPORT_TABLES"]

# The report's figures, in the page's order; each is written as PNG and PDF.
REPORT_FIGURES = ["fig_stra_square", "fig_stra_square_more", "fig_clock_square", "fig_intro_comparison",
                  "fig_model_square", "fig_model_sweeps", "fig_issue_bounds", "fig_algorithms", "fig_winners",
                  "fig_memlimit", "fig_tensorcore_square", "fig_dmma_square"]
# The report's tables, each written as Markdown under tables/.
REPORT_TABLES = ["block_sizes", "variants_L1", "variants_L2", "streaming_L1_S2", "model_notation", "occupancy",
                 "model_bounds", "issue_bounds", "model_crossover", "model_validation", "algorithms", "winners", "kernel_resources", "memory_limits",
                 "numerical_error", "numerical_error_checks", "claims", "tensorcore_accuracy", "tensorcore_kernels",
                 "points_left_out"]
