"""`strassenbench algorithms import`: a record algorithm from its publisher's format (strassenbench.algebra.records)
into a coefficient file of the project's format (algorithms/README.md), with its attribution in the header.

One algorithm goes to ``--out FILE.txt``; every key of an npz archive (no ``--key``) goes to ``--out FOLDER``,
a file per format named ``<prefix>-<a>x<b>x<c>-<rank>.txt`` (``alphatensor-3x4x11-103``: the sides may have two digits), all or nothing. A file is replaced only by an import
of the same algorithm name (its first line), never another file. Each file written is read back as any
coefficient file is (load_algorithm: the Brent equations again, from the text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..io import check_replace, publish, staging, write_atomic
from ..readers import check_name
from .algorithm import ALGORITHMS, Algorithm, AlgorithmError, load_algorithm
from .forms import form
from .records import Factors, coefficient_text, identify, literal_key, read_records

__all__ = ["COLLECTIONS", "Imported", "import_algorithms"]

# What a file of each format is, by default: the collection that publishes in it, and that collection's
# licence (../shared/algorithms/records/README.md); --source and --licence say otherwise.
COLLECTIONS = {
    "fmm": ("A. Perminov, FastMatrixMultiplication (github.com/dronperminov/FastMatrixMultiplication; "
            "arXiv 2511.20317, 2603.02398, 2512.21980)", "MIT"),
    "sms": ("J.-G. Dumas, PLinOpt data (github.com/jgdumas/plinopt; Dumas, Pernet, Sedoglavic, "
            "arXiv 2506.13242)", "CeCILL-B"),
    "npz": ("AlphaTensor, factorizations_r.npz (github.com/deepmind/alphatensor; Fawzi et al., Nature 610, "
            "47-53, 2022)", "CC-BY 4.0"),
}


@dataclass(frozen=True)
class Imported:
    name: str
    algorithm: Algorithm
    convention: str
    target: Path


def _header(name: str, alg: Algorithm, factors: Factors, convention: str, source: str, licence: str,
            order: str = "mkn") -> list[str]:
    made = "" if order == "mkn" else f", its form {order} (the original <{','.join(map(str, factors.dims))}> " \
        "transposed or rotated, Brent-checked)"
    return [f"{name} {alg.label}: imported by strassenbench algorithms import",
            f"from {_printable(factors.origin)}{made}",
            f"source: {_printable(source)}",
            f"licence: {_printable(licence)}",
            f"C numbered {convention} in the original (found by the exact Brent check); blocks row-major here"]


def _printable(text: str) -> str:
    """One header line: a file name or an option's text with its line breaks and other controls shown as '?'."""
    return "".join(c if c.isprintable() else "?" for c in text)[:500]


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _name(name: str) -> str:
    """An algorithm name that is a plain file name, never a path or a mixed spec (``+``), and not built in."""
    if not _NAME.fullmatch(name) or name in ALGORITHMS:
        raise AlgorithmError(f"algorithm name {name[:60]!r}: up to 100 letters, digits, '.', '_' and '-', "
                             f"starting with a letter or digit, and none of {', '.join(ALGORITHMS)}")
    check_name(f"{name}.txt", "algorithm", AlgorithmError)
    return name


def _identified(factors: Factors, name: str, order: str) -> tuple[Algorithm, str]:
    alg, convention = identify(factors, name)
    return (alg if order == "mkn" else form(alg, order, name)), convention


def import_algorithms(path: str | Path, fmt: str, out: str | Path, key: str | None = None, prefix: str | None = None,
                      source: str | None = None, licence: str | None = None, order: str = "mkn",
                      progress: Callable[[Imported], None] = lambda _: None) -> list[Imported]:
    """Read ``path`` (format ``fmt``), identify each algorithm's convention, take its form ``order``
    (strassenbench.algebra.forms) and write it (see the module)."""
    out = Path(out)
    every = fmt == "npz" and key is None
    if key is not None and fmt != "npz":
        raise AlgorithmError(f"--key picks a format of an npz archive; {path} is {fmt}")
    found = read_records(path, fmt, None if key is None else [literal_key(key)])
    source, licence = source or COLLECTIONS[fmt][0], licence or COLLECTIONS[fmt][1]
    if not every:
        if out.suffix != ".txt":
            raise AlgorithmError(f"--out {out}: a coefficient file is NAME.txt")
        name = _name(out.stem)
        alg, convention = _identified(found[0], name, order)
        text = coefficient_text(alg, _header(name, alg, found[0], convention, source, licence, order))
        check_replace(out, text.split("\n", 1)[0])
        _read_back(name, text, out.parent)
        write_atomic(out, text)
        done = [Imported(name, alg, convention, out)]
        progress(done[0])
        return done
    with staging(out) as stage:
        done = list(_every(found, prefix or "alphatensor", (source, licence, order), stage, out, progress))
        publish(stage, out)
    return done


def _every(found: list[Factors], prefix: str, attribution: tuple[str, str, str], stage: Path, out: Path,
           progress: Callable[[Imported], None]) -> Iterator[Imported]:
    source, licence, order = attribution
    seen: set[str] = set()
    for factors in found:
        name = _name(f"{prefix}-{'x'.join(map(str, factors.dims))}-{len(factors.u)}")
        if name in seen:  # two formats of one name: the second would overwrite the first
            raise AlgorithmError(f"{factors.origin}: a second algorithm named {name} in the archive")
        seen.add(name)
        alg, convention = _identified(factors, name, order)
        text = coefficient_text(alg, _header(name, alg, factors, convention, source, licence, order))
        write_atomic(stage / f"{name}.txt", text)
        load_algorithm(stage / f"{name}.txt", name)  # read back in the private stage, before anything is published
        item = Imported(name, alg, convention, out / f"{name}.txt")
        progress(item)
        yield item


def _read_back(name: str, text: str, folder: Path) -> None:
    """The text written is a coefficient file that passes the Brent equations as any other (load_algorithm)."""
    import tempfile

    with tempfile.TemporaryDirectory(dir=folder if folder.is_dir() else None) as tmp:
        probe = Path(tmp) / f"{name}.txt"
        probe.write_text(text)
        load_algorithm(probe, name)
