"""Output files under attack and accident: a planted symbolic link or other file at a lock, an output of
another kind, names too long for the file system, a destination that holds an unexpected folder, a full disk.
Every refusal is one line with exit status 2 and leaves every file as it was."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from strassenbench.cli import main
from strassenbench.io import OutputError, output_lock, publish, staging, write_atomic
from strassenbench.samples import KEY, read_samples, samples_path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
QUICK = ["--min-time", "0", "--warmup-time", "0", "--min-samples", "2", "--precision", "1", "--no-progress"]


def _snapshot(folder: Path) -> dict[str, object]:
    """Every entry under ``folder``: a file's bytes, a link's target, a folder as such."""
    out: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        out[name] = (f"-> {os.readlink(path)}" if path.is_symlink() else path.read_bytes() if path.is_file()
                     else "folder" if path.is_dir() else "other")
    return out


def _refused(capsys, argv: list[str], message: str, folder: Path) -> str:  # noqa: ANN001
    """``argv`` exits 2 with one line holding ``message``, and nothing under ``folder`` changed."""
    before = _snapshot(folder)
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert _snapshot(folder) == before
    return err


def _failed(capsys, code: int, *names: object) -> str:  # noqa: ANN001
    """A command that failed after it began (a full disk mid-sweep): exit 2, its error one line, the last,
    naming ``names``, and no traceback."""
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err, err
    assert [line for line in err.splitlines() if "error" in line] == err.splitlines()[-1:], err
    assert all(str(name) in err.splitlines()[-1] for name in names), err
    return err.splitlines()[-1]


def _bench(out: Path, sizes: str = "32", *extra: str) -> list[str]:
    return ["bench", "--impl", "gemm", "--sizes", sizes, "--out", str(out), *QUICK, *extra]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _consistent(csv: Path) -> None:
    """Every samples line of ``csv`` has its row, and neither file is half-written."""
    rows = pd.read_csv(csv, keep_default_na=False, dtype=str) if csv.exists() else pd.DataFrame(columns=KEY)
    keys = {tuple(str(r.get(k, "")) for k in KEY) for r in rows.to_dict("records")}
    assert set(read_samples(samples_path(csv))) <= keys  # a cut or broken line raises


# --- the lock ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_planted_at_the_lock_is_refused_and_its_target_untouched(tmp_path: Path, capsys,  # noqa: ANN001
                                                                         dangling: bool) -> None:
    victim = tmp_path / "victim" / "precious.txt"
    victim.parent.mkdir()
    if not dangling:
        victim.write_text("keep me\n")
    out = tmp_path / "run" / "square.csv"
    out.parent.mkdir()
    (out.parent / ".square.csv.lock").symlink_to(victim)
    _refused(capsys, _bench(out), "symbolic link", tmp_path)
    assert victim.exists() != dangling and (dangling or victim.read_text() == "keep me\n")
    assert not out.exists()


def test_a_fifo_or_a_second_name_at_the_lock_is_refused(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "square.csv"
    os.mkfifo(tmp_path / ".square.csv.lock")
    _refused(capsys, _bench(out), "not a lock file", tmp_path)
    (tmp_path / ".square.csv.lock").unlink()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    os.link(victim, tmp_path / ".square.csv.lock")
    _refused(capsys, _bench(out), "not a lock file", tmp_path)
    assert victim.read_text() == "keep me\n"


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    out = tmp_path / "square.csv"
    lock = tmp_path / ".square.csv.lock"
    lock.write_text(str(_dead_pid()))  # killed -9: its lock file stays, nobody holds it
    assert main(_bench(out)) == 0
    assert len(pd.read_csv(out)) == 1 and not lock.exists()


def test_a_lock_still_held_for_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    """A holder killed while a process it forked keeps the lock open: its PID names no live process."""
    out = tmp_path / "square.csv"
    lock = tmp_path / ".square.csv.lock"
    lock.write_text(str(_dead_pid()))
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(_bench(out)) == 0
        assert len(pd.read_csv(out)) == 1 and not lock.exists()
    finally:
        os.close(fd)


def test_a_live_holder_in_another_process_is_refused_naming_its_pid(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "square.csv"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom strassenbench.io import output_lock\n"
                               f"with output_lock({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "held"
        err = _refused(capsys, _bench(out), "another strassenbench", tmp_path)
        assert f"PID {holder.pid}" in err
    finally:
        holder.kill()
        holder.wait()
    assert main(_bench(out)) == 0  # the killed holder's lock is taken over


def test_two_locks_of_one_output_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    out = tmp_path / "x.csv"
    with output_lock(out):
        with pytest.raises(OutputError, match=f"PID {os.getpid()}"):
            with output_lock(out):
                pass
    with output_lock(out):  # released and removed: taken again
        assert (tmp_path / ".x.csv.lock").read_text() == str(os.getpid())
    assert not (tmp_path / ".x.csv.lock").exists()


# --- outputs of another kind ------------------------------------------------------------------------------------


def test_sysinfo_never_replaces_another_kind_of_file(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    readme = tmp_path / "README.md"
    readme.write_text("# My project\n\nNotes.\n")
    _refused(capsys, ["sysinfo", "--engine", "numpy", "--out", str(readme)], "holds something else", tmp_path)
    settings = tmp_path / "settings.json"
    settings.write_text('{\n  "editor": "vim"\n}\n')
    _refused(capsys, ["sysinfo", "--engine", "numpy", "--out", str(settings)], "holds something else", tmp_path)
    (tmp_path / "table.csv").write_text("impl,m\ngemm,1\n")
    _refused(capsys, ["sysinfo", "--engine", "numpy", "--out", str(tmp_path / "table.csv")], "holds something else",
             tmp_path)
    system = tmp_path / "system.json"
    assert main(["sysinfo", "--engine", "numpy", "--out", str(system)]) == 0
    assert main(["sysinfo", "--engine", "numpy", "--out", str(system)]) == 0  # its own kind: replaced
    assert json.loads(system.read_text())["engine"] == "numpy"


def test_bench_checks_its_samples_file_and_system_json_before_measuring(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "square.csv"
    samples_path(out).write_text("# notes, not samples\n")
    _refused(capsys, _bench(out), "holds something else", tmp_path)
    samples_path(out).unlink()
    samples_path(out).mkdir()
    _refused(capsys, _bench(out), "not a regular file", tmp_path)
    samples_path(out).rmdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    samples_path(out).symlink_to(victim)
    _refused(capsys, _bench(out), "symbolic link", tmp_path)
    samples_path(out).unlink()
    (tmp_path / "system.json").write_text("# a note\n")
    _refused(capsys, _bench(out), "system.json", tmp_path)


# --- long names -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [240, 245, 250, 255])
def test_long_out_names_are_refused_before_any_work(tmp_path: Path, capsys, length: int) -> None:  # noqa: ANN001
    name = "a" * (length - 4) + ".csv"
    folder = "r" * length
    cases = [
        _bench(tmp_path / name, "32,48,64,80,96,112,128", "--min-samples", "50"),
        ["sysinfo", "--engine", "numpy", "--out", str(tmp_path / (name[:-4] + "json"))],
        ["collect", str(FIXTURES / "gpu_a" / "square.csv"), "--out", str(tmp_path / name)],
        ["report", "--data", str(FIXTURES / "gpu_a"), "--out", str(tmp_path / folder)],
        ["compare", str(FIXTURES / "gpu_a"), str(FIXTURES / "gpu_b"), "--out", str(tmp_path / folder)],
        ["variants", "--levels", "1", "--out", str(tmp_path / name)],
    ]
    for argv in cases:
        started = time.perf_counter()
        _refused(capsys, argv, "too long", tmp_path)
        assert time.perf_counter() - started < 5, argv  # refused before measuring or drawing anything


def test_a_name_that_fits_with_everything_made_beside_it_is_taken(tmp_path: Path) -> None:
    out = tmp_path / ("a" * 220 + ".csv")  # its samples file's temporary name: 220 + 14 + 14 bytes
    assert main(_bench(out)) == 0
    assert len(pd.read_csv(out)) == 1 and samples_path(out).is_file()


# --- all or nothing ---------------------------------------------------------------------------------------------


def test_a_report_with_an_unexpected_folder_or_file_in_its_folder_changes_nothing(tmp_path: Path,  # noqa: ANN001
                                                                                   capsys) -> None:
    out = tmp_path / "report"
    assert main(["report", "--data", str(FIXTURES / "gpu_a"), "--out", str(out)]) == 0
    capsys.readouterr()
    figure = sorted((out / "figures").glob("*.png"))[-1]  # the last one published: the others would go first
    figure.unlink()
    figure.mkdir()
    _refused(capsys, ["report", "--data", str(FIXTURES / "gpu_a"), "--out", str(out)], "a folder", tmp_path)
    assert not list(tmp_path.glob(".report.partial.*"))


@pytest.mark.parametrize("plant", ["page", "link", "file"])
def test_publish_refuses_an_unexpected_destination_before_replacing_anything(tmp_path: Path, plant: str) -> None:
    dest = tmp_path / "report"
    (dest / "figures").mkdir(parents=True)
    (dest / "figures" / "a.png").write_bytes(b"\x89PNG\r\n\x1a\nold")
    (dest / "index.html").write_text("<!doctype html><html><head><title>strassenbench report</title></head>\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if plant == "page":  # another site's page where the report's goes
        (dest / "index.html").write_text("<!doctype html><html><head><title>My site</title></head></html>\n")
    elif plant == "link":  # a link would write the tables out of the folder
        (dest / "tables").symlink_to(elsewhere)
    else:  # a file where a folder goes
        (dest / "tables").write_text("notes\n")
    before = _snapshot(tmp_path)
    with staging(dest) as stage:
        (stage / "figures").mkdir()
        (stage / "figures" / "a.png").write_bytes(b"\x89PNG\r\n\x1a\nnew")
        (stage / "index.html").write_text("<!doctype html><html><head><title>strassenbench report</title>\n")
        (stage / "tables").mkdir()
        (stage / "tables" / "t.md").write_text("| a |\n|---|\n| 1 |\n")
        with pytest.raises(OutputError, match="holds something else|symbolic link|a file where"):
            publish(stage, dest)
    assert _snapshot(tmp_path) == before


def test_compare_with_an_unexpected_folder_changes_nothing(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "cmp"
    (out / "index.html").mkdir(parents=True)
    argv = ["compare", str(FIXTURES / "gpu_a"), str(FIXTURES / "gpu_b"), "--out", str(out)]
    _refused(capsys, argv, "a folder", tmp_path)
    (out / "index.html").rmdir()
    (out / "compare.csv").write_text("name,size\nphoto,12\n")
    _refused(capsys, argv, "holds something else", tmp_path)
    (out / "compare.csv").unlink()
    assert main(argv) == 0 and (out / "compare.csv").is_file() and (out / "fig_compare_speedup.png").is_file()
    assert not list(tmp_path.glob(".cmp.partial.*"))


def test_collect_publishes_its_table_and_samples_together_or_neither(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    part = tmp_path / "part" / "square.csv"
    assert main(_bench(part)) == 0
    out = tmp_path / "pub" / "square.csv"
    samples_path(out).mkdir(parents=True)  # a folder where the samples file goes
    _refused(capsys, ["collect", str(part), "--out", str(out)], "a folder", tmp_path)
    samples_path(out).rmdir()
    assert main(["collect", str(part), "--out", str(out)]) == 0
    assert out.read_bytes() == part.read_bytes() and read_samples(samples_path(out)) == read_samples(
        samples_path(part))


def test_a_failed_move_puts_back_every_file_already_published(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "a.csv").write_text("x\n1\n")
    (dest / "b.csv").write_text("x\n2\n")
    real = os.replace
    calls = []

    def failing(src, dst, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(dst)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, *args, **kwargs)

    with staging(dest) as stage:
        for name, value in (("a.csv", 10), ("b.csv", 20), ("c.csv", 30)):
            write_atomic(stage / name, f"x\n{value}\n")
        (stage / "sub").mkdir()
        write_atomic(stage / "sub" / "d.csv", "x\n40\n")
        monkeypatch.setattr(os, "replace", failing)
        with pytest.raises(OutputError, match="No space left"):
            publish(stage, dest)
    monkeypatch.undo()
    assert _snapshot(dest) == {"a.csv": b"x\n1\n", "b.csv": b"x\n2\n"}
    assert not list(tmp_path.glob(".out.partial.*"))


# --- a full disk, in process ------------------------------------------------------------------------------------


def _enospc_on(monkeypatch, name: str, after: int = 0) -> None:  # noqa: ANN001
    """os.replace onto a file called ``name`` fails with ENOSPC after ``after`` successes."""
    real, count = os.replace, [0]

    def replace(src, dst, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if Path(dst).name == name:
            count[0] += 1
            if count[0] > after:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


def test_a_full_disk_mid_sweep_leaves_no_samples_without_their_row(tmp_path: Path, capsys,  # noqa: ANN001
                                                                   monkeypatch) -> None:
    out = tmp_path / "square.csv"
    _enospc_on(monkeypatch, "square.csv", after=2)
    _failed(capsys, main(_bench(out, "32,48,64,80")), "No space left", out)
    monkeypatch.undo()
    assert len(pd.read_csv(out)) == 2 and len(read_samples(samples_path(out))) == 2
    _consistent(out)
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob(".*.lock"))
    assert main(_bench(out, "32,48,64,80")) == 0  # the rerun measures the rest
    assert len(pd.read_csv(out)) == 4 and len(read_samples(samples_path(out))) == 4


def test_a_failed_samples_append_leaves_the_file_as_it_was(tmp_path: Path, capsys, monkeypatch) -> None:  # noqa: ANN001
    out = tmp_path / "square.csv"
    assert main(_bench(out)) == 0
    before = samples_path(out).read_bytes()
    real = os.write

    def short(fd, data):  # noqa: ANN001, ANN202 - writes part of a line, then the disk is full
        if os.fstat(fd).st_ino == samples_path(out).stat().st_ino:
            real(fd, bytes(data)[:10])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", short)
    capsys.readouterr()
    code = main(_bench(out, "32,48"))
    monkeypatch.undo()
    _failed(capsys, code, "No space left", samples_path(out))
    assert samples_path(out).read_bytes() == before and len(pd.read_csv(out)) == 1


def test_collect_and_sysinfo_on_a_full_disk_write_nothing(tmp_path: Path, capsys, monkeypatch) -> None:  # noqa: ANN001
    part = tmp_path / "part" / "square.csv"
    assert main(_bench(part)) == 0
    out = tmp_path / "pub" / "square.csv"
    _enospc_on(monkeypatch, "square.samples.jsonl")
    capsys.readouterr()
    _failed(capsys, main(["collect", str(part), "--out", str(out)]), "No space left", out.parent)
    assert not out.exists() and not samples_path(out).exists() and not list(out.parent.glob(".*"))
    _enospc_on(monkeypatch, "system.json")
    _refused(capsys, ["sysinfo", "--engine", "numpy", "--out", str(tmp_path / "pub" / "system.json")],
             "No space left", tmp_path)


def test_a_resumed_sweep_drops_samples_without_their_row(tmp_path: Path) -> None:
    """A run killed between a point's samples line and its row, or in the middle of a line."""
    out = tmp_path / "square.csv"
    assert main(_bench(out)) == 0
    line = json.loads(samples_path(out).read_text().splitlines()[0])
    orphan = {**line, "m": 999, "n": 999, "k": 999}
    with samples_path(out).open("a") as handle:
        handle.write(json.dumps(orphan) + "\n" + json.dumps(orphan)[:30])  # and a line cut short
    assert main(_bench(out, "32,48")) == 0
    _consistent(out)
    assert len(read_samples(samples_path(out))) == 2
    assert main(["collect", str(out), "--out", str(tmp_path / "all.csv")]) == 0


# --- a full disk, for real: a small tmpfs (as root) -------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path):  # noqa: ANN201
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True,
                             text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()[:100]}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(folder: Path, leave: int) -> None:
    """Fill ``folder``'s file system but ``leave`` bytes (whole pages)."""
    free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    (folder / "filler").write_bytes(b"\0" * (free - leave))


def _one_line_naming(capsys, code: int, folder: Path) -> str:  # noqa: ANN001
    err = _failed(capsys, code, "No space left", folder)
    assert ".partial." not in err
    assert not list(folder.glob("**/.*.tmp")) and not list(folder.glob(".*.partial.*")), list(folder.iterdir())
    return err


def test_bench_on_a_full_disk(small_disk: Path, capsys) -> None:  # noqa: ANN001
    out = small_disk / "square.csv"
    sizes = ",".join(str(16 + 8 * i) for i in range(24))
    code = main(["bench", "--impl", "gemm", "--sizes", sizes, "--out", str(out), "--min-time", "0",
                 "--warmup-time", "0", "--min-samples", "400", "--precision", "1", "--no-progress"])
    _one_line_naming(capsys, code, small_disk)
    _consistent(out)
    assert not list(small_disk.glob(".*.lock"))


def test_collect_on_a_full_disk(small_disk: Path, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    part = tmp_path / "part" / "square.csv"
    assert main(_bench(part, "32,48,64,80", "--min-samples", "200")) == 0
    _fill(small_disk, 8192)
    out = small_disk / "square.csv"
    capsys.readouterr()
    _one_line_naming(capsys, main(["collect", str(part), "--out", str(out)]), small_disk)
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]


def test_sysinfo_on_a_full_disk(small_disk: Path, capsys) -> None:  # noqa: ANN001
    _fill(small_disk, 4096)  # room for the lock only
    _one_line_naming(capsys, main(["sysinfo", "--engine", "numpy", "--out", str(small_disk / "system.json")]),
                     small_disk)
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]
