"""The report's and the comparison's HTML pages, rendered from templates (``templates/*.html.j2``) by Jinja2 with
autoescaping on: every value a page shows (GPU names, folder and file names, captions, table cells) is escaped
where it is put, in text and in double-quoted attributes, so nothing read from a results folder becomes markup."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined

__all__ = ["Table", "table_of", "render"]

_ENV = Environment(loader=PackageLoader("strassenbench.report", "templates"), autoescape=True,
                   undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


@dataclass(frozen=True)
class Table:
    """A table as text: its column names and rows of cells, every one a string the template escapes."""

    columns: list[str]
    rows: list[list[str]]


def _text(value: object, number: Callable[[float], str] | None) -> str:
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "NaN"
        return number(float(value)) if number else str(value)
    return "" if value is None else str(value)


def table_of(frame: pd.DataFrame, number: Callable[[float], str] | None = None) -> Table:
    """``frame``'s columns and cells as text (``number`` formats floats; NaN reads NaN, as pandas writes it)."""
    rows = [[_text(v, number) for v in row] for row in frame.astype(object).itertuples(index=False, name=None)]
    return Table([str(c) for c in frame.columns], rows)


def render(template: str, **values: object) -> str:
    """The page ``template`` with ``values``, every one escaped where the template puts it."""
    return _ENV.get_template(template).render(**values)
