"""Record algorithms in their publishers' formats, read into the project's coefficient format.

Three formats (each collection's own; algorithms/README.md says where the catalogue's files came from):

- ``fmm``: the JSON of Perminov's FastMatrixMultiplication collection: ``n`` = [n1, n2, n3] (A is n1 x n2,
  B is n2 x n3), ``m`` = the rank, ``u``, ``v``, ``w`` one row per product over the entries of A, B and C.
- ``sms``: PLinOpt's triples ``<name>_L.sms`` (A side), ``_R.sms`` (B side), ``_P.sms`` (C side): after ``#``
  comments a ``rows cols R`` line, then 1-based ``i j value`` lines (integers or fractions), ``0 0 0`` at the
  end. L and R have a row per product, P a column per product.
- ``npz``: AlphaTensor's factorizations, key ``'a,b,c'`` -> (u, v, w), each entries x rank. Most values are
  NumPy object arrays, which only unpickling reads: `_SafeUnpickler` admits NumPy's array reconstruction and
  nothing else.

How a collection numbers the entries of C (row-major, C_ij at i n3 + j, or transposed, at j n1 + i:
AlphaTensor decomposes (A B)^T) is never assumed: `identify` tries both with the exact Brent check
(Algorithm.check) and says which held; a file for which neither holds is refused in one line.
"""

from __future__ import annotations

import io
import math
import pickle
import re
import zipfile
import zlib
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..limits import MAX_ALGORITHM_BYTES, MAX_ENTRY, MAX_GRID_SIDE, MAX_RANK, MAX_RECORD_BYTES
from ..readers import check_schema, read_bytes, read_json, read_text
from .algorithm import Algorithm, AlgorithmError, fraction_matrix, parse_entry

__all__ = ["FORMATS", "Factors", "read_records", "identify", "coefficient_text", "guess_format", "CONVENTIONS"]

FORMATS = ("fmm", "sms", "npz")
CONVENTIONS = ("row-major", "transposed")


@dataclass(frozen=True)
class Factors:
    """One algorithm as a collection writes it: <n1, n2, n3>, and u, v, w with a row per product over the
    entries of A, B and C (C in the collection's own order); ``origin`` names the file (and key)."""

    dims: tuple[int, int, int]
    u: list[list[Fraction]]
    v: list[list[Fraction]]
    w: list[list[Fraction]]
    origin: str


def guess_format(path: Path) -> str | None:
    """The format a file's name says: .json fmm, .sms sms, .npz npz; None when it says none."""
    return {".json": "fmm", ".sms": "sms", ".npz": "npz"}.get(path.suffix.lower())


def read_records(path: str | Path, fmt: str, keys: list[str] | None = None) -> list[Factors]:
    """The algorithms of ``path`` in format ``fmt``: one for fmm and sms, the keys asked for (all when None) of
    an npz. Anything malformed or beyond the limits is an AlgorithmError naming the file."""
    path = Path(path)
    if fmt == "fmm":
        return [_read_fmm(path)]
    if fmt == "sms":
        return [_read_sms(path)]
    return _read_npz(path, keys)


# ------------------------------------------------------------------------------------------------ checks
def _entry(value: object, where: str) -> int | Fraction:
    """An integer (a JSON or NumPy integer, or an integral float) or a fraction 'p/q', within MAX_ENTRY. An
    integer stays a Python int (it has numerator and denominator too): AlphaTensor's 93 formats are 2.4 M of them."""
    if isinstance(value, (bool, np.bool_)):
        raise AlgorithmError(f"{where}: entry {value!r} is not a number")
    if isinstance(value, (int, np.integer)):
        if abs(int(value)) > MAX_ENTRY:
            raise AlgorithmError(f"{where}: entry {value} is larger than {MAX_ENTRY:,} in numerator or denominator")
        return int(value)
    if isinstance(value, (float, np.floating)):  # AlphaTensor's larger formats hold 0.125: exact in binary
        if not math.isfinite(value) or Fraction(float(value)).denominator > MAX_ENTRY:
            raise AlgorithmError(f"{where}: entry {value!r} is not a fraction with a denominator up to {MAX_ENTRY:,}")
        number = Fraction(float(value))
    elif isinstance(value, str):  # an SMS value or a JSON string: the coefficient files' own syntax
        return parse_entry(value, where)
    else:
        raise AlgorithmError(f"{where}: entry {str(value)[:40]!r} is not an integer or a fraction")
    if abs(number.numerator) > MAX_ENTRY or number.denominator > MAX_ENTRY:
        raise AlgorithmError(f"{where}: entry {number} is larger than {MAX_ENTRY:,} in numerator or denominator")
    return number


def _check_dims(dims: tuple[int, ...], rank: int, where: str) -> tuple[int, int, int]:
    if len(dims) != 3 or not all(_integer(d) and 1 <= d <= MAX_GRID_SIDE for d in dims):
        raise AlgorithmError(f"{where}: format {'x'.join(map(str, dims))} is not three sides of 1 to "
                             f"{MAX_GRID_SIDE}")
    if not _integer(rank) or not 1 <= rank <= MAX_RANK:
        shown = f"{rank:,}" if _integer(rank) else f"{str(rank)[:20]} (not an integer)"
        raise AlgorithmError(f"{where}: rank {shown} is not 1 to {MAX_RANK:,}")
    return dims[0], dims[1], dims[2]


def _integer(value: object) -> bool:
    """A JSON or NumPy integer: not a float (2.0), not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _digits(token: str) -> bool:
    """ASCII digits only: str.isdigit() takes Unicode digits ('²', '٣') that int() refuses or reads otherwise."""
    return token.isascii() and token.isdigit()


def _rows(rows: list, count: int, width: int, what: str, where: str) -> list[list[Fraction]]:
    """``count`` rows of ``width`` entries each (_entry), or AlgorithmError naming which is off."""
    if len(rows) != count:
        raise AlgorithmError(f"{where}: {what} has {len(rows)} rows, expected {count}")
    out = []
    for i, row in enumerate(rows):
        if len(row) != width:
            raise AlgorithmError(f"{where}: {what} row {i + 1} has {len(row)} entries, expected {width}")
        out.append([_entry(x, f"{where}: {what} row {i + 1}") for x in row])
    return out


# ----------------------------------------------------------------------------------------------- formats
def _read_fmm(path: Path) -> Factors:
    document = read_json(path, what="an fmm JSON scheme", limit=MAX_ALGORITHM_BYTES, error=AlgorithmError)
    check_schema(document, "fmm", str(path), "an fmm JSON scheme (keys n, m, u, v, w)", AlgorithmError)
    n1, n2, n3 = _check_dims(tuple(document["n"]), document["m"], str(path))
    rank = document["m"]
    return Factors((n1, n2, n3), _rows(document["u"], rank, n1 * n2, "u", str(path)),
                   _rows(document["v"], rank, n2 * n3, "v", str(path)),
                   _rows(document["w"], rank, n1 * n3, "w", str(path)), path.name)


_SMS_SIDES = ("L", "R", "P")


def sms_files(path: Path) -> tuple[Path, Path, Path]:
    """The three files of an SMS triple, from any of them or from their common prefix."""
    stem = re.sub(r"_[LRP]\.sms$", "", path.name)
    return tuple(path.with_name(f"{stem}_{side}.sms") for side in _SMS_SIDES)  # type: ignore[return-value]


def _read_sms_matrix(path: Path) -> tuple[int, int, dict[tuple[int, int], Fraction]]:
    text = read_text(path, limit=MAX_ALGORITHM_BYTES, what="an SMS matrix", error=AlgorithmError)
    lines = [(n, line.split()) for n, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines or len(lines[0][1]) != 3 or lines[0][1][2] != "R" or not all(_digits(t) for t in lines[0][1][:2]):
        raise AlgorithmError(f"{path}: not an SMS matrix (its first line is 'rows cols R')")
    rows, cols = (int(t[:7]) for t in lines[0][1][:2])
    if not (1 <= rows <= MAX_RANK and 1 <= cols <= MAX_RANK):
        raise AlgorithmError(f"{path}: {rows:,} x {cols:,} is not 1 to {MAX_RANK:,} each way")
    entries: dict[tuple[int, int], Fraction] = {}
    for lineno, tokens in lines[1:]:
        if tokens == ["0", "0", "0"]:
            return rows, cols, entries
        if len(tokens) != 3 or not _digits(tokens[0]) or not _digits(tokens[1]):
            raise AlgorithmError(f"{path} line {lineno}: not 'i j value'")
        i, j = int(tokens[0][:7]), int(tokens[1][:7])
        if not (1 <= i <= rows and 1 <= j <= cols) or (i, j) in entries:
            raise AlgorithmError(f"{path} line {lineno}: entry ({i}, {j}) is outside {rows} x {cols} or given twice")
        entries[i, j] = _entry(tokens[2], f"{path} line {lineno}")
    raise AlgorithmError(f"{path}: no '0 0 0' line ends the matrix")


def _dense(rows: int, cols: int, entries: dict[tuple[int, int], Fraction]) -> list[list[Fraction]]:
    dense = [[Fraction(0)] * cols for _ in range(rows)]
    for (i, j), value in entries.items():
        dense[i - 1][j - 1] = value
    return dense


def _read_sms(path: Path) -> Factors:
    files = sms_files(path)
    (rl, al, el), (rr, br, er), (cp, rp, ep) = (_read_sms_matrix(f) for f in files)
    if not rl == rr == rp:
        raise AlgorithmError(f"{files[0].with_suffix('')}: L, R and P name {rl}, {rr} and {rp} products")
    found = re.match(r"([0-9]{1,3})x([0-9]{1,3})x([0-9]{1,3})_", files[0].name)
    dims = tuple(int(d) for d in found.groups()) if found else _sides(al, br, cp, str(files[0]))
    n1, n2, n3 = _check_dims(dims, rl, str(files[0]))
    if (al, br, cp) != (n1 * n2, n2 * n3, n1 * n3):
        raise AlgorithmError(f"{files[0]}: {al}, {br} and {cp} entries of A, B and C do not fit <{n1},{n2},{n3}>")
    w = [list(col) for col in zip(*_dense(cp, rp, ep))]  # P has a column per product
    return Factors((n1, n2, n3), _dense(rl, al, el), _dense(rr, br, er), w, files[0].name.replace("_L.sms", ""))


def _sides(a: int, b: int, c: int, where: str) -> tuple[int, int, int]:
    """n1, n2, n3 from the entries of A (n1 n2), B (n2 n3) and C (n1 n3)."""
    n2 = math.isqrt(a * b // c) if c else 0
    if n2 and a % n2 == 0 and b % n2 == 0 and (a // n2) * (b // n2) == c:
        return a // n2, n2, b // n2
    raise AlgorithmError(f"{where}: {a}, {b} and {c} entries are not n1 n2, n2 n3 and n1 n3 of any format")


# AlphaTensor's npz: NumPy's own reconstruction of arrays, and nothing else, may be unpickled.
_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"), ("numpy", "dtype")}


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"asks for {module}.{name}, which is not NumPy's array reconstruction")
        if name == "_reconstruct":
            return np.zeros(0).__reduce__()[0]  # NumPy's own _reconstruct, wherever this NumPy keeps it
        return getattr(np, name)


def _npy(data: bytes, where: str) -> np.ndarray:
    """One .npy member: its header read by NumPy (literal_eval), a plain array by NumPy, an object array by
    the safe unpickler."""
    from numpy.lib import format as npformat

    stream = io.BytesIO(data)
    try:
        version = npformat.read_magic(stream)
        header = {(1, 0): npformat.read_array_header_1_0, (2, 0): npformat.read_array_header_2_0}.get(version)
        if header is None:
            raise ValueError(f"format version {version}")
        shape, _, dtype = header(stream)
    except (ValueError, SyntaxError) as err:
        raise AlgorithmError(f"{where}: not a NumPy array ({str(err)[:80]})") from None
    if math.prod(shape) > MAX_RANK * MAX_GRID_SIDE**2 * 3:
        raise AlgorithmError(f"{where}: an array of shape {shape} is larger than any algorithm within the limits")
    if dtype.hasobject:
        try:
            array = _SafeUnpickler(stream).load()
        except pickle.UnpicklingError as err:
            raise AlgorithmError(f"{where}: refused: the pickle {err}") from None
        except Exception as err:  # noqa: BLE001 (any malformed pickle is the same refusal)
            raise AlgorithmError(f"{where}: not a NumPy array ({type(err).__name__})") from None
        if not isinstance(array, np.ndarray):
            raise AlgorithmError(f"{where}: not a NumPy array (its pickle holds a {type(array).__name__})")
        return array
    try:
        return npformat.read_array(io.BytesIO(data), allow_pickle=False)
    except (ValueError, EOFError, OSError) as err:
        raise AlgorithmError(f"{where}: not a NumPy array ({err})") from None


def _read_npz(path: Path, keys: list[str] | None) -> list[Factors]:
    data = read_bytes(path, limit=MAX_RECORD_BYTES, what="an npz archive", error=AlgorithmError)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = {info.filename.removesuffix(".npy"): info for info in archive.infolist()}
    except (zipfile.BadZipFile, ValueError, EOFError):
        raise AlgorithmError(f"{path}: not an npz archive (not a zip file)") from None
    if len(members) != len(archive.infolist()):
        raise AlgorithmError(f"{path}: an npz archive that holds one name twice")
    wanted = list(members) if keys is None else keys
    for key in wanted:
        if key not in members:
            raise AlgorithmError(f"{path}: no key {key!r} (it has {', '.join(sorted(members)[:8])}, ...)")
    total = sum(members[key].file_size for key in wanted)
    if total > MAX_RECORD_BYTES:
        raise AlgorithmError(f"{path}: its arrays unpack to {total:,} bytes, above the limit of {MAX_RECORD_BYTES:,}")
    return [_npz_factors(path, key, _npy(_member(archive, members[key], path), f"{path}[{key}]")) for key in wanted]


def _member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path) -> bytes:
    """One member's bytes, at most its declared size (zipfile stops there); a bad CRC, a truncated or
    unsupported stream is a format error."""
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError) as err:
        raise AlgorithmError(f"{path}: member {info.filename[:40]!r} is damaged ({str(err)[:60]})") from None


def _npz_factors(path: Path, key: str, value: np.ndarray) -> Factors:
    where = f"{path}[{key}]"
    if not re.fullmatch(r"[1-9][0-9]?,[1-9][0-9]?,[1-9][0-9]?", key):  # canonical: '02,2,2' would name 2,2,2 again
        raise AlgorithmError(f"{where}: the key is not 'a,b,c' (three sides of 1 to 99, no leading zeros)")
    dims = tuple(int(x) for x in key.split(","))
    parts = list(value) if value.dtype.hasobject or value.ndim == 3 else []
    if len(parts) != 3 or not all(isinstance(p, np.ndarray) and p.ndim == 2 for p in parts):
        raise AlgorithmError(f"{where}: not three 2-dimensional factor matrices (u, v, w)")
    rank = parts[0].shape[1]
    n1, n2, n3 = _check_dims(dims, rank, where)
    # u is (a b) x R, v (b c) x R, w (c a) x R: a row per entry, a column per product
    u, v, w = (_array_rows(p, rank, size, name, where)
               for p, size, name in zip(parts, (n1 * n2, n2 * n3, n1 * n3), "uvw"))
    return Factors((n1, n2, n3), u, v, w, f"{path.name}[{key}]")


def _array_rows(p: np.ndarray, count: int, width: int, what: str, where: str) -> list[list[int | Fraction]]:
    """_rows of a factor matrix (an entry per row, a product per column); an array of integers, or of
    integral floats, is checked at once (AlphaTensor's 93 formats hold 2.4 M entries)."""
    a = p.T
    if a.dtype.kind in "iuf" and a.shape == (count, width) and np.isfinite(a).all():
        if np.abs(a).max(initial=0) > MAX_ENTRY:
            raise AlgorithmError(f"{where}: {what} has an entry larger than {MAX_ENTRY:,}")
        if a.dtype.kind != "f" or (a == np.rint(a)).all():
            return a.astype(np.int64).tolist()
        for k in range(1, 20):  # dyadic (AlphaTensor's 0.5 and 0.125): ints, and a Fraction where one is not
            scaled = a * 2.0**k
            if (scaled == np.rint(scaled)).all():
                rows = np.floor_divide(scaled, 2.0**k).astype(np.int64).tolist()
                for i, j in zip(*np.nonzero(scaled % 2.0**k)):
                    rows[i][j] = Fraction(int(scaled[i, j]), 2**k)
                return rows
    return _rows(a.tolist(), count, width, what, where)


# --------------------------------------------------------------------------------------- the conventions
def _c_order(n1: int, n3: int, convention: str) -> list[int]:
    """For each row-major entry of C (i n3 + j), its position in the collection's order."""
    if convention == "row-major":
        return list(range(n1 * n3))
    return [j * n1 + i for i in range(n1) for j in range(n3)]


def identify(factors: Factors, name: str) -> tuple[Algorithm, str]:
    """The algorithm in the project's order (blocks row-major, Eq. eqn:strassenpart) and the convention of C
    that made it pass the Brent equations exactly; AlgorithmError when neither does."""
    n1, n2, n3 = factors.dims
    U, du = fraction_matrix(factors.u, f"{factors.origin} (u)")
    V, dv = fraction_matrix(factors.v, f"{factors.origin} (v)")
    for convention in CONVENTIONS:
        order = _c_order(n1, n3, convention)
        W, dw = fraction_matrix([[row[p] for p in order] for row in factors.w], f"{factors.origin} (w)")
        alg = Algorithm(name=name, dims=(n1, n2, n3), U=U, V=V, W=W, denominators=(du, dv, dw),
                        source=factors.origin)
        if not alg.brent_residual().any():
            return alg, convention
    raise AlgorithmError(f"{factors.origin}: fails the Brent equations of <{n1},{n2},{n3}> with C numbered "
                         "row-major and transposed: not an algorithm of that format in either convention")


def coefficient_text(alg: Algorithm, header: list[str]) -> str:
    """The project's coefficient format (algorithms/README.md): ``# header`` lines, then U, V and W, a row per
    block and a column per product, separated by ``#`` lines."""
    def block(matrix: np.ndarray, denominator: int) -> list[str]:
        if denominator == 1:
            return [" ".join(map(str, row)) for row in matrix.T.tolist()]
        return [" ".join(_fraction(Fraction(int(x), denominator)) for x in row) for row in matrix.T]

    lines = [f"# {line}" for line in header]
    for i, (matrix, denominator) in enumerate(zip((alg.U, alg.V, alg.W), alg.denominators)):
        lines += (["#"] if i else []) + block(matrix, denominator)
    return "\n".join(lines) + "\n"


def _fraction(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def literal_key(text: str) -> str:
    """An npz key as the collection writes it ('3,4,5'), from '3,4,5' or '3x4x5'."""
    parts = re.split(r"[,x]", text.strip())
    if len(parts) != 3 or not all(_digits(p) and len(p) <= 2 for p in parts):
        raise AlgorithmError(f"--key {text[:40]!r} is not 'a,b,c' (three sides, e.g. 3,4,5)")
    return ",".join(str(int(p)) for p in parts)

