"""The test hook STRASSENBENCH_INJECT_FAILURE: a failure planted at chosen points, to show what catches it.

``IMPL:M:N:K[:KIND]``, with ``*`` for any M, N or K. KIND is one of

- ``error`` (the default): the point raises an error, recorded as its row's ``error`` status;
- ``crash``: the worker process measuring the point is killed (a ``fault`` row);
- ``fault``: the CUDA context is poisoned with an illegal address (the cuda engine only; a ``fault`` row);

which strassenbench.bench.runner plants, and three wrong results, which the implementation computes on every
engine (strassenbench.impls: numpy, the emulator, the CPU device, a GPU) and which the check must catch
(``check_failed`` in bench, ``FAIL`` in verify):

- ``zero``: C is left as beta C0, no product added;
- ``drop``: one product's contribution is left out (the first product of a plan or of the reference's
  schedule; a GEMM's one product is the GEMM, so there ``drop`` leaves C as beta C0 too);
- ``tf32``: a 3xTF32 implementation computes in 1xTF32 (for CUTLASS's 3xTF32, cuBLAS's TF32 GEMM runs).
"""

from __future__ import annotations

from . import env

__all__ = ["VARIABLE", "KINDS", "RESULT_KINDS", "Hook", "hook", "planted"]

VARIABLE = "STRASSENBENCH_INJECT_FAILURE"
RESULT_KINDS = ("zero", "drop", "tf32")  # wrong results, planted by the implementation
KINDS = ("error", "crash", "fault", *RESULT_KINDS)
ANY = "*"


class Hook:
    """A parsed hook: the implementation, the sizes (None for ``*``) and the kind."""

    def __init__(self, impl: str, sizes: tuple[int | None, int | None, int | None], kind: str) -> None:
        self.impl, self.sizes, self.kind = impl, sizes, kind

    def matches(self, impl: str, m: int, n: int, k: int) -> bool:
        return impl == self.impl and all(want is None or want == got for want, got in zip(self.sizes, (m, n, k)))


def _size(text: str) -> int | None:
    if text == ANY:
        return None
    if not (text.isascii() and text.isdigit() and 0 < len(text) < 19 and int(text) > 0):
        raise ValueError
    return int(text)


def hook() -> Hook | None:
    """The hook the variable sets, or None when it is unset or empty; ValueError naming the variable when it is
    malformed (the implementation's name is checked by its user: strassenbench.bench.runner.injection)."""
    text = env.value(VARIABLE)
    if text is None:
        return None
    parts = text.split(":")
    kind = parts.pop() if len(parts) == 5 else "error"
    try:
        if len(parts) != 4 or kind not in KINDS:
            raise ValueError
        sizes = tuple(_size(p) for p in parts[1:])
    except ValueError:
        raise ValueError(f"{VARIABLE}={text!r}: expected impl:m:n:k or impl:m:n:k:KIND with m, n, k positive "
                         f"or *, and KIND one of {', '.join(KINDS)}") from None
    return Hook(parts[0], sizes, kind)  # type: ignore[arg-type]


def planted(impl: str, m: int, n: int, k: int) -> str | None:
    """The wrong result (RESULT_KINDS) the hook plants in ``impl`` at m x n x k, or None."""
    try:
        found = hook()
    except ValueError:
        return None  # refused where the command starts (strassenbench.bench.runner.injection)
    if found is None or found.kind not in RESULT_KINDS or not found.matches(impl, m, n, k):
        return None
    return found.kind
