"""The figures a report draws, kept as objects while a block runs (tests of the report)."""

from __future__ import annotations

import contextlib

import pytest

from strassenbench.report import figures


@contextlib.contextmanager
def kept_figures():  # noqa: ANN201
    """Every figure object as figures.save saves it, by stem, while the block runs."""
    figs: dict = {}
    real = figures.save

    def keep(fig, out, stem):  # noqa: ANN001, ANN202
        figs[stem] = fig
        return real(fig, out, stem)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figures, "save", keep)
        yield figs
