"""The Brent check is exact for every file the readers take: no partial sum wraps around, no common denominator
overflows, and the whole AlphaTensor collection is checked in bounded time."""

from __future__ import annotations

import io
import itertools
import json
import pickle
import signal
import subprocess
import sys
import time
import warnings
import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from strassenbench.algebra.algorithm import AlgorithmError, get_algorithm, load_algorithm
from strassenbench.cli import main

SHARED = Path(__file__).resolve().parents[3] / "shared" / "algorithms" / "records"
RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "records"


def _file(path: Path, U: list[list[object]], V: list[list[object]], W: list[list[object]]) -> Path:
    """A coefficient file (algorithms/README.md): a row per block, a column per product."""
    blocks = [" \n".join(" ".join(str(x) for x in row) for row in M) for M in (U, V, W)]
    path.write_text("# a test file\n" + "\n#\n".join(blocks) + "\n")
    return path


def _strassen_plus(extra: int, value: int) -> tuple[list, list, list]:
    """Strassen's coefficients (rows: blocks, columns: products) and ``extra`` more products, each
    value A0 x value B0 into value C0: a residue of extra value^3 on one Brent equation."""
    s = get_algorithm("strassen")
    rows = []
    for M in (s.U, s.V, s.W):
        rows.append([[int(x) for x in row] + [value if b == 0 else 0] * extra for b, row in enumerate(M.T)])
    return tuple(rows)


def test_a_residue_of_2_to_the_64_is_not_a_pass(tmp_path) -> None:  # noqa: ANN001
    """Strassen plus 128 products of 2^19 on one entry: a residue of 128 x 2^57 = 2^64, which int64 sums wrap to
    0. The check finds it (and names the Brent equation); the same with a residue that is not a multiple of
    2^64 too."""
    for extra in (128, 3):
        path = _file(tmp_path / f"plus{extra}.txt", *_strassen_plus(extra, 2**19))
        with pytest.raises(AlgorithmError, match="fails the Brent equations"):
            load_algorithm(path)


def test_coprime_denominators_are_refused_in_one_line(tmp_path, capsys) -> None:  # noqa: ANN001
    """Fractions whose common denominator is past what the numerators can carry: one line naming the file, not
    an overflow."""
    U, V, W = (list(map(list, M)) for M in _strassen_plus(0, 1))
    primes = [999983, 999979, 999961, 999959]
    U[0] = [f"1/{primes[i % 4]}" if i < 4 else x for i, x in enumerate(U[0])]
    path = _file(tmp_path / "coprime.txt", U, V, W)
    with pytest.raises(AlgorithmError, match="common denominator is above"):
        load_algorithm(path)
    assert main(["verify", "--levels", "1", "--algorithm", str(path), "--m", "8", "--n", "8", "--k", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "common denominator" in err and "coprime.txt" in err


def test_large_exact_numerators_are_checked_in_python_integers() -> None:
    """Numerators whose products pass 2^63 are summed in Python's integers: an algorithm scaled by 2^20 on each
    matrix (the denominators 2^20 too) is still Strassen, and a one-unit error in it is still found."""
    from strassenbench.algebra.algorithm import Algorithm

    s = get_algorithm("strassen")
    big = 2**20 + 1
    scaled = Algorithm("big", s.dims, s.U * big, s.V * big, s.W * big, denominators=(big, big, big))
    assert not scaled.brent_residual().any() and scaled.brent_residual().dtype == object
    W = scaled.W.copy()
    W[0, 0] += 1
    wrong = Algorithm("wrong", s.dims, scaled.U, scaled.V, W, denominators=(big, big, big))
    assert wrong.brent_residual().any()
    assert scaled.stability_factor == Fraction(12)


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "alphatensor" / "factorizations_r.npz").exists(), reason="no AlphaTensor npz")
def test_the_whole_alphatensor_collection_imports(tmp_path) -> None:  # noqa: ANN001
    """All 93 keys of AlphaTensor's npz, Brent-checked exactly, into a folder (docs/robustness.md states the
    time it takes; key 11,12,12 alone took 75 s with the einsum)."""
    assert main(["algorithms", "import", str(SHARED / "alphatensor" / "factorizations_r.npz"),
                 "--out", str(tmp_path / "at")]) == 0
    assert len(list((tmp_path / "at").glob("*.txt"))) == 93


# ------------------------------------------------------------------------------------- the importer's files
def _classical_npz(path: Path, side: int | tuple[int, int, int], key: str | None = None) -> Path:
    """The classical <m,k,n> algorithm (rank m k n) added to the npz ``path`` in AlphaTensor's layout (u, v, w: an
    entry per row, a product per column; C transposed), each product's A term halved and its C term doubled:
    dyadic floats, as AlphaTensor's larger formats hold."""
    m, k, n = (side,) * 3 if isinstance(side, int) else side
    u, v, w = np.zeros((m * k, m * k * n)), np.zeros((k * n, m * k * n)), np.zeros((m * n, m * k * n))
    for r, (i, p, j) in enumerate(itertools.product(range(m), range(k), range(n))):
        u[i * k + p, r], v[p * n + j, r], w[j * m + i, r] = 0.5, 1, 2
    factors = np.empty(3, dtype=object)
    factors[:] = [u, v, w]
    member = io.BytesIO()
    np.lib.format.write_array(member, factors if len({u.shape, v.shape, w.shape}) > 1 else np.array([u, v, w]),
                              allow_pickle=True)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(f"{key or f'{m},{k},{n}'}.npy", member.getvalue())
    return path


def test_a_large_dyadic_npz_imports_and_reads_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A rank-512 format of halves and twos (the arrays are checked at once, the fractions kept exact): one
    progress line per algorithm, and the file reads back as the same algorithm."""
    npz = _classical_npz(_classical_npz(tmp_path / "big.npz", 8), 2)
    out = tmp_path / "existing"
    out.mkdir()  # FILE.txt|FOLDER: every key into a folder that is already there
    assert main(["algorithms", "import", str(npz), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("Brent-checked") == 2 and "2 algorithms imported" in err
    alg = load_algorithm(out / "alphatensor-8x8x8-512.txt")
    assert alg.rank == 512 and alg.denominators[0] == 2 and set(np.unique(alg.U)) == {0, 1}


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    assert main(["algorithms", "import", *argv]) == 2, argv
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)


def test_odd_record_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A float side in an fmm JSON, Unicode digits in an SMS header, an npz key with a leading zero or a name
    held twice, a member whose CRC is wrong, a member that is a zip bomb declaring a false size, and an object
    array whose pickle is a plain list: each a format error in one line, nothing written."""
    out = tmp_path / "out"
    scheme = json.loads((RECORDS / "2x2x2_m7_ZT.json").read_text())
    for change, fragment in ((dict(n=[2.0, 2, 2]), "is not three sides"), (dict(m=7.0), "(not an integer)")):
        path = tmp_path / "float.json"
        path.write_text(json.dumps({**scheme, **change}))
        _one_line(capsys, [str(path), "--out", str(out / "x.txt")], fragment)
    for stem, header in (("2x2x2_7_U", "7 \u0664 R"), ("2x2x2_7_V", "\u00b2 4 R")):  # Arabic-Indic 4, superscript 2
        for side in "LRP":
            text = (RECORDS / f"2x2x2_7_Strassen_{side}.sms").read_text()
            assert side != "L" or "\n7 4 R\n" in text
            (tmp_path / f"{stem}_{side}.sms").write_text(text.replace("\n7 4 R\n", f"\n{header}\n"))
        _one_line(capsys, [str(tmp_path / f"{stem}_L.sms"), "--out", str(out / "x.txt")], "not an SMS matrix")
    npz = _classical_npz(_classical_npz(tmp_path / "twice.npz", 2), 2, "02,2,2")
    _one_line(capsys, [str(npz), "--out", str(out)], "no leading zeros")
    twice = tmp_path / "same.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name it is asked to write
        _classical_npz(_classical_npz(twice, 2), 2)
    _one_line(capsys, [str(twice), "--out", str(out)], "holds one name twice")
    good = (tmp_path / "good.npz").read_bytes() if _classical_npz(tmp_path / "good.npz", 2) else b""
    data = bytearray(good)
    header = zipfile.ZipFile(io.BytesIO(good)).infolist()[0].header_offset
    central = good.rindex(b"PK\x01\x02")
    data[central - 1] ^= 0xFF  # the member's last byte (stored): its CRC-32 no longer matches
    (tmp_path / "crc.npz").write_bytes(bytes(data))
    _one_line(capsys, [str(tmp_path / "crc.npz"), "--out", str(out)], "is damaged")
    bomb = bytearray(good)  # the local and central sizes both say 100 bytes: the stream holds more
    info = zipfile.ZipFile(io.BytesIO(good)).infolist()[0]
    for offset in (header + 22, central + 24):
        bomb[offset:offset + 4] = (100).to_bytes(4, "little")
    (tmp_path / "bomb.npz").write_bytes(bytes(bomb))
    assert info.file_size > 100
    _one_line(capsys, [str(tmp_path / "bomb.npz"), "--out", str(out)], "is damaged")
    array = np.empty(3, dtype=object)
    member = io.BytesIO()
    np.lib.format.write_array(member, array, allow_pickle=True)
    listed = member.getvalue().replace(pickle.dumps(array, protocol=3)[:0], b"")
    with zipfile.ZipFile(tmp_path / "list.npz", "w") as archive:  # a header of an object array, a list pickled
        archive.writestr("2,2,2.npy", listed[:listed.index(b"\n") + 1] + pickle.dumps([1, 2, 3], protocol=3))
    _one_line(capsys, [str(tmp_path / "list.npz"), "--out", str(out)], "its pickle holds a list")
    assert not out.exists() and not list(tmp_path.glob(".*partial*"))


def test_an_import_stopped_by_sigterm_leaves_nothing(tmp_path: Path) -> None:
    """SIGTERM (as a batch system or `kill` sends it) unwinds as Ctrl-C does: exit 143, one line, and no
    staging folder, lock or --out folder left behind."""
    npz = tmp_path / "many.npz"
    for side in ((8, 8, 8), (7, 8, 8), (8, 7, 8), (8, 8, 7), (7, 7, 8), (7, 8, 7)):
        _classical_npz(npz, side)
    out = tmp_path / "deep" / "at"
    proc = subprocess.Popen([sys.executable, "-m", "strassenbench", "algorithms", "import", str(npz), "--out", str(out)],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list((tmp_path / "deep").glob(".at.partial.*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the import ended before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 143 and err.strip().splitlines()[-1] == "strassenbench: stopped by SIGTERM"
    assert not (tmp_path / "deep").exists(), list((tmp_path / "deep").rglob("*"))
