"""Record algorithms from their publishers' formats (strassenbench.algebra.records, `algorithms import`): the
samples of tests/fixtures/records (README there), their conventions found by the Brent check, and bad input."""

from __future__ import annotations

import collections
import io
import json
import os
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from strassenbench.algebra.algorithm import AlgorithmError, get_algorithm, load_algorithm
from strassenbench.algebra.records import identify, read_records
from strassenbench.cli import main

RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "records"


@pytest.mark.parametrize("path, fmt, key, label, convention", [
    ("2x2x2_m7_ZT.json", "fmm", None, "<2,2,2;7>", "transposed"),
    ("3x4x5_m47_ZT.json", "fmm", None, "<3,4,5;47>", "transposed"),
    ("2x2x2_7_Strassen_L.sms", "sms", None, "<2,2,2;7>", "row-major"),
    ("4x4x4_48_rational_P.sms", "sms", None, "<4,4,4;48>", "row-major"),
    ("alphatensor_sample.npz", "npz", "2,2,2", "<2,2,2;7>", "transposed"),
    ("alphatensor_sample.npz", "npz", "3,4,5", "<3,4,5;47>", "transposed"),
])
def test_each_collections_convention_is_found_and_the_file_reads_back(path, fmt, key, label, convention,  # noqa: ANN001
                                                                      tmp_path) -> None:  # noqa: ANN001
    """Perminov's and AlphaTensor's collections number C transposed, PLinOpt's row-major: the importer finds it,
    says so, and writes a coefficient file that load_algorithm reads back as the same algorithm."""
    (factors,) = read_records(RECORDS / path, fmt, None if key is None else [key])
    alg, found = identify(factors, "imported")
    assert alg.label == label and found == convention and not alg.brent_residual().any()
    out = tmp_path / "imported.txt"
    argv = ["algorithms", "import", str(RECORDS / path), "--out", str(out)] + (["--key", key] if key else [])
    assert main(argv) == 0
    again = load_algorithm(out)
    for which in "UVW":
        assert np.array_equal(again.numerators(which), alg.numerators(which))
    assert again.denominators == alg.denominators
    header = out.read_text().splitlines()[:5]
    assert header[0].startswith(f"# imported {label}:") and path.split("_L.sms")[0].split("_P.sms")[0] in header[1]
    assert header[3].startswith("# licence: ") and f"C numbered {convention}" in header[4]


def test_the_rational_4x4_algorithm_keeps_its_fractions(tmp_path: Path) -> None:
    """Dumas, Pernet and Sedoglavic's rank-48 algorithm has coefficients 1/2 and 1/8: imported exactly."""
    out = tmp_path / "dps444-48.txt"
    assert main(["algorithms", "import", str(RECORDS / "4x4x4_48_rational_L.sms"), "--out", str(out)]) == 0
    alg = get_algorithm(str(out))
    assert alg.rank == 48 and alg.denominators != (1, 1, 1) and "1/2" in out.read_text()


def test_every_key_of_an_npz_goes_into_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "at"
    assert main(["algorithms", "import", str(RECORDS / "alphatensor_sample.npz"), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["alphatensor-2x2x2-7.txt", "alphatensor-3x4x5-47.txt"]
    err = capsys.readouterr().err
    assert "alphatensor-3x4x5-47 <3,4,5;47>: C transposed" in err and "2 algorithms imported" in err


class _Payload:
    def __reduce__(self):  # noqa: ANN204
        return (os.system, ("touch planted-by-pickle",))


def _npz_with(tmp_path: Path, value: object) -> Path:
    """An npz whose member '2,2,2' is an object array holding ``value`` (pickled as numpy.save does)."""
    array = np.empty(1, dtype=object)
    array[0] = value
    member = io.BytesIO()
    np.lib.format.write_array(member, array, allow_pickle=True)
    path = tmp_path / "planted.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("2,2,2.npy", member.getvalue())
    return path


def test_an_npz_that_asks_for_any_other_class_is_refused_unrun(tmp_path: Path, monkeypatch,  # noqa: ANN001
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    planted = _npz_with(tmp_path, _Payload())
    assert b"system" in planted.read_bytes() or b"posix" in zipfile.ZipFile(planted).read("2,2,2.npy")
    assert main(["algorithms", "import", str(planted), "--key", "2,2,2", "--out", str(tmp_path / "x.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused: the pickle asks for" in err and "not NumPy's array reconstruction" in err
    assert not (tmp_path / "planted-by-pickle").exists() and not (tmp_path / "x.txt").exists()
    with pytest.raises(AlgorithmError, match="asks for collections.OrderedDict"):
        read_records(_npz_with(tmp_path, collections.OrderedDict(u=1)), "npz", ["2,2,2"])


def test_a_scheme_in_neither_convention_is_refused_naming_the_file(tmp_path: Path) -> None:
    scheme = json.loads((RECORDS / "2x2x2_m7_ZT.json").read_text())
    scheme["w"][0][0] = 1 - scheme["w"][0][0]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(scheme))
    with pytest.raises(AlgorithmError, match=r"broken.json: fails the Brent equations of <2,2,2> with C numbered "
                                             r"row-major and transposed"):
        identify(read_records(path, "fmm")[0], "broken")


def _scheme(tmp_path: Path, **change: object) -> str:
    scheme = json.loads((RECORDS / "2x2x2_m7_ZT.json").read_text())
    scheme.update(change)
    path = tmp_path / f"changed{len(list(tmp_path.glob('changed*')))}.json"
    path.write_text(json.dumps(scheme))
    return str(path)


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.txt"
    other = tmp_path / "other.txt"
    other.write_text("not an algorithm\n")
    (tmp_path / "scheme.dat").write_text("{}")
    os.mkfifo(tmp_path / "fifo.json")
    cases = [
        ([str(tmp_path / "scheme.dat")], "give --format"),
        ([str(tmp_path / "fifo.json")], "not a regular file"),
        ([str(tmp_path), "--format", "fmm"], "a folder"),
        ([str(RECORDS / "2x2x2_m7_ZT.json"), "--format", "npz"], "not an npz archive"),
        ([str(RECORDS / "alphatensor_sample.npz"), "--format", "fmm"], "not an fmm JSON scheme"),
        ([str(RECORDS / "2x2x2_m7_ZT.json"), "--key", "2,2,2"], "--key picks a format of an npz"),
        ([str(RECORDS / "alphatensor_sample.npz"), "--key", "9,9,9"], "no key '9,9,9'"),
        ([str(RECORDS / "alphatensor_sample.npz"), "--key", "two"], "is not 'a,b,c'"),
        ([_scheme(tmp_path, m=8)], "u has 7 rows, expected 8"),
        ([_scheme(tmp_path, n=[2, 2, 13])], "is not three sides of 1 to 12"),
        ([_scheme(tmp_path, m=1001)], "rank 1,001 is not 1 to 1,000"),
        ([_scheme(tmp_path, u=[["1e9"]] * 7)], "entries, expected 4"),
        ([_scheme(tmp_path, n="2x2x2")], "key 'n'"),
    ]
    for argv, fragment in cases:
        assert main(["algorithms", "import", *argv, "--out", str(out)]) == 2, argv
        err = capsys.readouterr().err
        assert fragment in err and err.count("\n") == 1, (argv, err)
        assert not out.exists()
    assert main(["algorithms", "import", str(RECORDS / "2x2x2_m7_ZT.json"), "--out", str(other)]) == 2
    assert "holds something else" in capsys.readouterr().err and other.read_text() == "not an algorithm\n"
    for name in ("strassen.txt", "x.csv", "a+b.txt", "a b.txt", "-x.txt"):
        assert main(["algorithms", "import", str(RECORDS / "2x2x2_m7_ZT.json"), "--out", str(tmp_path / name)]) == 2
        assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / name).exists()
    for prefix in ("../evil", "a\nb", "x+"):  # every key of an npz: the names the prefix makes stay file names
        assert main(["algorithms", "import", str(RECORDS / "alphatensor_sample.npz"), "--prefix", prefix,
                     "--out", str(tmp_path / "every")]) == 2
        assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "every").exists() and not (tmp_path.parent / "evil222-7.txt").exists()
    odd = tmp_path / "odd\nname.json"  # a file name and option text become one header line each
    odd.write_text((RECORDS / "2x2x2_m7_ZT.json").read_text())
    assert main(["algorithms", "import", str(odd), "--source", "a\nb", "--out", str(tmp_path / "odd.txt")]) == 0
    assert "# from odd?name.json" in (tmp_path / "odd.txt").read_text() and load_algorithm(tmp_path / "odd.txt")
    assert main(["algorithms", "import", str(RECORDS / "2x2x2_m7_ZT.json"), "--out", str(out)]) == 0
    assert main(["algorithms", "import", str(RECORDS / "2x2x2_m7_ZT.json"), "--out", str(out)]) == 0  # a rerun


def test_the_safe_unpickler_reads_what_numpy_writes() -> None:
    """Any object array of integer matrices that numpy.save writes, the reader takes (NumPy 2's module names)."""
    from strassenbench.algebra.records import _npy

    value = np.empty(3, dtype=object)
    for i in range(3):
        value[i] = np.arange(6, dtype=np.int64).reshape(2, 3) * (i + 1)
    member = io.BytesIO()
    np.lib.format.write_array(member, value, allow_pickle=True)
    got = _npy(member.getvalue(), "test")
    assert all(np.array_equal(a, b) for a, b in zip(got, value))
    assert pickle.DEFAULT_PROTOCOL >= 3


@pytest.mark.parametrize("name", ["grey322-11-50", "grey234-20-144", "hk323-15-94"])
def test_the_six_forms_are_brent_checked_schemes_of_each_order(name: str) -> None:
    """Rotation and transposition give a scheme for every order of the sides, same rank; a form that permuted
    a block wrongly would fail Algorithm.check inside forms.form."""
    from strassenbench.algebra.forms import FORMS, form

    alg = get_algorithm(name)
    sides = dict(zip("mkn", alg.dims))
    for order in FORMS:
        derived = form(alg, order)
        assert derived.dims == tuple(sides[c] for c in order) and derived.rank == alg.rank
        assert not derived.brent_residual().any()
    # transposition swaps the sides of each product: the stability factor stays (a rotation moves W's role)
    assert form(alg, "nkm").stability_factor == alg.stability_factor
    assert np.array_equal(form(form(alg, "nkm"), "nkm").U, alg.U)  # transposing twice is the original
    with pytest.raises(AlgorithmError, match="form 'mmm' is not one of"):
        form(alg, "mmm")


def test_import_writes_the_form_asked_for(tmp_path: Path) -> None:
    out = tmp_path / "p453.txt"
    assert main(["algorithms", "import", str(RECORDS / "3x4x5_m47_ZT.json"), "--form", "knm", "--out", str(out)]) == 0
    alg = load_algorithm(out)
    assert alg.dims == (4, 5, 3) and alg.rank == 47 and "its form knm" in out.read_text().splitlines()[1]
    assert main(["algorithms", "import", str(RECORDS / "3x4x5_m47_ZT.json"), "--form", "xyz", "--out", str(out)]) == 2
