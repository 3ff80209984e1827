"""Support code of the tests: the CPU device behind CuPy (cudasim) and running the workflow (workflow_helpers)."""
