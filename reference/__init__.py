"""The workspace-based ("conventional") Strassen over BLAS GEMM, as the package ``strassenbench.reference``.

Its modules live in this top-level ``reference/`` folder of the source tree (the design card's layout), and
pyproject.toml maps the package here (setuptools' ``package-dir``): an editable install imports them from
here, a wheel carries them inside ``strassenbench/reference/``."""
