"""The check every bad-input test makes: a command refused in one line on stderr, exit status 2, no traceback, and
a folder's files as they were."""

from __future__ import annotations

from pathlib import Path


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(capsys, argv: list[str], message: str, folder: Path | None = None) -> str:  # noqa: ANN001
    """``argv`` exits 2 with one line holding ``message`` and no traceback, and ``folder`` is unchanged."""
    from strassenbench.cli import main

    before = snapshot(folder) if folder else None
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    if folder:
        assert snapshot(folder) == before
    return err
