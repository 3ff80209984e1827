"""The report: every figure and table of the paper from a run's results (data/<device>/), plus compare."""
