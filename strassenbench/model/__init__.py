"""The paper's performance model (Sec. s:analysis): GPU parameters, counts, times, bounds, predictions."""
