"""Result files: written atomically, so an interrupted run never leaves a truncated file behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd

__all__ = ["write_atomic", "render", "write_table"]


def _read_umask() -> int:
    mask = os.umask(0)  # the only way to read it; done once, at import, before any thread writes
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it into place."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", newline="") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a result file is as readable as any other
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def render(frame: pd.DataFrame, fmt: str) -> str:
    """A table as CSV or markdown text."""
    return frame.to_csv(index=False) if fmt == "csv" else frame.to_markdown(index=False) + "\n"


def write_table(frame: pd.DataFrame, fmt: str, out: str | None, footer: str = "") -> None:
    """Print the table, or write it atomically to ``out``."""
    text = render(frame, fmt) + (f"\n{footer}\n" if footer and fmt == "markdown" else "")
    if out:
        write_atomic(out, text)
    else:
        print(text, end="")
