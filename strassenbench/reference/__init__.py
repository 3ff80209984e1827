"""The workspace-based ("conventional") Strassen over BLAS GEMM, whose modules live in the top-level
``reference/`` folder of the source tree (the design card's layout). This package only points there:
``$STRASSENBENCH_REFERENCE`` (a folder with strassen_ref.py, checked by strassenbench.env) or ``reference/``
beside the package (an editable install)."""

from __future__ import annotations

from pathlib import Path

from .. import env

_SOURCE = (env.source_folder("STRASSENBENCH_REFERENCE", "the reference sources", "strassen_ref.py")
           or Path(__file__).resolve().parents[2] / "reference")
if not (_SOURCE / "strassen_ref.py").is_file():
    raise ImportError(f"the reference sources are not at {_SOURCE} (install strassenbench from its source tree "
                      "with pip install -e, or set STRASSENBENCH_REFERENCE)")
__path__.append(str(_SOURCE))  # noqa: F821 - a package's own __path__
