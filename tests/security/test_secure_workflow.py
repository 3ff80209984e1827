"""The workflow's config cannot run code, lead out of the project or end in a traceback: every value a rule gives
a shell command is quoted, names and folders that become paths stay inside the project, device folders are
distinct, and every config error (a trailing newline, an empty list, a GPU without a build, a config file too
big or an alias bomb) is one line naming the key and exit status 2. Dry runs only, besides one schedule table."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import time
from pathlib import Path

import pytest

from support.workflow_helpers import ROOT, copy_workflow, snakemake

SMOKE = ["--config", "profile=smoke", "backend=numpy"]
GPU_PLAN = ["--config", "profile=smoke", "assume_gpu=NVIDIA H100 80GB HBM3@sm_90"]


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    return copy_workflow(tmp_path / "project")


def _hostile(workdir: Path) -> tuple[str, list[Path]]:
    """A folder name that runs two commands if a shell reads it unquoted (jobs run in the project), and the files
    they would create."""
    return "data/x $(touch pwned-dollar) ;b`touch pwned-backtick`'q", [workdir / "pwned-dollar",
                                                                     workdir / "pwned-backtick"]


def _error_lines(proc) -> list[str]:  # noqa: ANN001
    """The refusal's lines on stderr: the workflow stops with exit status 2, no traceback and no frames."""
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, (proc.returncode, text[-3000:])
    for word in ("Traceback", "KeyError", "IndexError", "WorkflowError", 'File "'):
        assert word not in text, text[-3000:]
    return [line for line in proc.stderr.splitlines() if line.strip()]


def _refused(proc, key: str) -> str:  # noqa: ANN001
    """The refusal, asserting that it is one line on stderr and names ``key``."""
    lines = _error_lines(proc)
    assert len(lines) == 1 and key in lines[0], lines
    return lines[0]


def _shell_commands(proc) -> list[str]:  # noqa: ANN001
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return [line.split("Shell command: ", 1)[1] for line in proc.stdout.splitlines() if "Shell command: " in line]


def _read_whole(commands: list[str], value: str) -> int:
    """How many commands hold ``value``, asserting that the shell reads it as (part of) one word wherever it
    appears: a word with its ``$(`` or backtick is a word with all of it."""
    holding = [c for c in commands if value in " ".join(shlex.split(c))]
    for command in holding:
        words = shlex.split(command)
        assert all(value in word for word in words if "$(" in word or "`" in word), command
    return len(holding)


def test_a_hostile_compare_folder_is_one_quoted_word(workdir: Path) -> None:
    folder, marks = _hostile(workdir)
    (workdir / folder).mkdir(parents=True)
    proc = snakemake(["-n", "-p", *SMOKE, f"compare={json.dumps([folder])}"], workdir)
    compare = [c for c in _shell_commands(proc) if c.startswith("strassenbench compare")]
    assert compare and shlex.split(compare[0])[2:4] == ["data/cpu", folder], compare
    assert not any(mark.exists() for mark in marks)


def test_a_hostile_coefficient_file_is_quoted_in_every_command_and_runs_nothing(workdir: Path) -> None:
    """An algorithm file in a colleague's folder named to run commands: every command of a GPU plan (build,
    verify, bench, collect, logs) reads it whole; a real job (a schedule table) runs with it and runs nothing."""
    folder, marks = _hostile(workdir)
    (workdir / folder).mkdir(parents=True)
    shutil.copy(ROOT / "algorithms" / "grey322-11-50.txt", workdir / folder / "g.txt")
    path = f"{folder}/g.txt"
    (workdir / "hostile.yaml").write_text(f"algorithm: {json.dumps(path)}\nalgorithms: {json.dumps([path])}\n"
                                          f"impls: {json.dumps(['gemm', path + 'x1'])}\n")
    proc = snakemake(["-n", "-p", "--configfile", "hostile.yaml", *GPU_PLAN], workdir)
    commands = _shell_commands(proc)
    assert _read_whole(commands, path) > 10
    builds = [shlex.split(c) for c in commands if c.startswith("strassenbench build")]
    assert builds and f"{path}:1" in builds[0] and f"{path}:2" in builds[0]
    run = snakemake(["report/tables/schedule_L1_S2.md", "--cores", "1", "--configfile", "hostile.yaml", *SMOKE],
                    workdir)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert "makespan" in (workdir / "report/tables/schedule_L1_S2.md").read_text()
    assert not any(mark.exists() for mark in marks)


@pytest.mark.parametrize(("key", "value"), [
    ("algorithm", "$(touch {mark})"),
    ("algorithms", '["`touch {mark}`"]'),
    ("impls", '["gemm", "$(touch {mark})x1"]'),
    ("tensor_impls", '["x;touch {mark};-tf32"]'),
    ("accuracy_impls", '["gemm $(touch {mark})"]'),
    ("driver_cuda", "12.4;touch {mark}"),
    ("streams", '["2;touch {mark}"]'),
    ("strategy", "best$(touch {mark})"),
    ("assume_gpu", "H100@sm_90;touch {mark}"),
])
def test_hostile_values_that_are_no_name_are_refused_naming_the_key(workdir: Path, tmp_path: Path, key: str,
                                                                    value: str) -> None:
    mark = tmp_path / "pwned"
    proc = snakemake(["-n", "-p", *SMOKE, f"{key}={value.format(mark=mark)}"], workdir)
    assert _refused(proc, key).startswith("config: ")
    assert not mark.exists()


def test_a_hostile_gpu_name_only_names_its_folder(workdir: Path) -> None:
    proc = snakemake(["-n", "-p", "--config", "profile=smoke", 'gpus=["A100 $(touch pwned)@sm_80@a100"]'], workdir)
    commands = _shell_commands(proc)
    assert any("--expect-device a100-touch-pwned " in c for c in commands), commands[:3]
    assert "data/a100-touch-pwned/square.csv" in proc.stdout
    assert all("$(" not in c for c in commands) and not (workdir / "pwned").exists()


@pytest.mark.parametrize(("key", "value", "message"), [
    ("algorithms", "[../../outside.txt]", "algorithms[0] '../../outside.txt'"),
    ("algorithms", "[/etc/outside.txt]", "algorithms[0] '/etc/outside.txt': an absolute path"),
    ("impls", "[gemm, ../../../x.txtx1]", "impls[1] '../../../x.txtx1'"),
    ("algorithm", "a" * 5000, "longer than 1024 characters"),
    ("compare", "[../elsewhere]", "compare[0] '../elsewhere'"),
    ("compare", "[/tmp]", "compare[0] '/tmp': an absolute path"),
    ("compare", "[elsewhere]", "compare[0] 'elsewhere': not a folder inside results/, data/, report/"),
    ("compare", '[""]', "compare.0 = ''"),
])
def test_paths_out_of_the_project_are_refused_naming_the_key(workdir: Path, key: str, value: str,
                                                             message: str) -> None:
    (workdir / "elsewhere").mkdir()
    proc = snakemake(["-n", *SMOKE, f"{key}={value}"], workdir)
    assert message in _refused(proc, key)


@pytest.mark.parametrize(("gpus", "message"), [
    ('["NVIDIA A100@sm_80", "nvidia a100@sm_80@a100"]',
     "gpus[0] 'NVIDIA A100@sm_80' and gpus[1] 'nvidia a100@sm_80@a100' are both data/nvidia-a100/"),
    ('["!!!@sm_80"]', "gpus[0] '!!!@sm_80': the name has no letter or digit"),
    ('["a@sm_0"]', "gpus[0] 'a@sm_0': unrecognised compute capability"),
    ('["a@sm_60"]', "gpus[0] 'a@sm_60': compute capability 6.0 is older than every build"),
    ('[" a@sm_80"]', "gpus[0] = ' a@sm_80': starts or ends with a blank"),
])
def test_gpus_that_give_no_distinct_folder_or_build_are_refused(workdir: Path, gpus: str, message: str) -> None:
    proc = snakemake(["-n", "--config", "profile=smoke", f"gpus={gpus}"], workdir)
    assert message in _refused(proc, "gpus")


def test_assume_gpu_without_a_build_is_one_message(workdir: Path) -> None:
    proc = snakemake(["-n", "--config", "assume_gpu=a@sm_5"], workdir)
    assert "assume_gpu 'a@sm_5'" in _refused(proc, "assume_gpu")


@pytest.mark.parametrize(("text", "key", "message"), [
    ('profile: "paper\\n"\n', "profile", "profile = 'paper\\n': a line break"),
    ('algorithm: "strassen\\n"\n', "algorithm", "algorithm = 'strassen\\n'"),
    ('compare: ["data/x\\ty"]\n', "compare", "compare[0] = 'data/x\\ty'"),
    ('gpus: ["H100@sm_90\\n"]\n', "gpus", "gpus[0] = 'H100@sm_90\\n'"),
    ("streams: []\n", "streams", "streams = []"),
])
def test_newlines_and_empty_lists_are_one_message(workdir: Path, text: str, key: str, message: str) -> None:
    (workdir / "extra.yaml").write_text(text)
    proc = snakemake(["-n", "--configfile", "extra.yaml", "--config", "backend=numpy"], workdir)
    assert message in _refused(proc, key)


def test_empty_shapes_are_one_message(workdir: Path) -> None:
    """An empty shapes list once ended in an IndexError."""
    import yaml

    config = workdir / "config/config.yaml"
    data = yaml.safe_load(config.read_text())
    data["profiles"]["smoke"]["verify"]["shapes"] = []
    config.write_text(yaml.safe_dump(data))
    proc = snakemake(["-n", *SMOKE], workdir)
    assert "profiles.smoke.verify.shapes = []" in _refused(proc, "shapes")


@pytest.mark.parametrize(("given", "expected"), [
    ("driver_cuda=12.4", "12.4"),
    ("driver_cuda=12.10", "12.10"),  # a float to Snakemake: 12.1
    ('driver_cuda="13.0"', "13.0"),  # Snakemake drops the quotes: a float
    ("driver.yaml", "12.10"),  # unquoted in a file: a float to YAML
])
def test_the_readme_driver_cuda_number_is_read_as_written(workdir: Path, given: str, expected: str) -> None:
    assert "driver_cuda=12.4" in (ROOT / "docs" / "workflow.md").read_text()  # the documented spelling
    (workdir / "driver.yaml").write_text("driver_cuda: 12.10\n")
    args = ["--configfile", given, *SMOKE] if given.endswith(".yaml") else [*SMOKE, given]
    proc = snakemake(["-n", "-p", *args], workdir)
    builds = [c for c in _shell_commands(proc) if c.startswith("strassenbench build")]
    assert builds and f"--driver-cuda {expected} " in builds[0], builds


def test_a_driver_cuda_that_is_no_version_is_refused(workdir: Path) -> None:
    proc = snakemake(["-n", *SMOKE, "driver_cuda=12"], workdir)
    assert "driver_cuda = '12'" in _refused(proc, "driver_cuda")


def _bomb(levels: int = 8) -> str:
    """Nine-fold YAML aliases: 9**levels strings from a few hundred bytes."""
    lines = ["  - &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"  - &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "compare:\n" + "\n".join(lines) + "\n"


@pytest.mark.parametrize("where", ["configfile", "project", "command line"])
def test_an_alias_bomb_is_refused_quickly(workdir: Path, where: str) -> None:
    """Some 40 million strings from 300 bytes: refused in seconds (it once ran for minutes)."""
    args = [*SMOKE]
    if where == "configfile":
        (workdir / "bomb.yaml").write_text(_bomb())
        args += ["--configfile", "bomb.yaml"]
    elif where == "project":
        config = workdir / "config/config.yaml"
        config.write_text(config.read_text().replace("compare: []\n", "") + _bomb())
    else:
        anchors = ["&a0 [x, x, x, x, x, x, x, x, x]"]
        anchors += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
        args += [f"compare=[{', '.join(anchors)}]"]
    start = time.monotonic()
    proc = snakemake(["-n", *args], workdir, timeout=120)
    message = _refused(proc, "config")
    assert "100000 values" in message and ("compare" in message or "line" in message), message
    assert time.monotonic() - start < 60


def test_a_config_file_too_big_is_refused_before_it_is_read(workdir: Path) -> None:
    (workdir / "big.yaml").write_text("# " + "x" * (1 << 20) + "\nprofile: smoke\n")
    proc = snakemake(["-n", "--configfile", "big.yaml", *SMOKE], workdir, timeout=120)
    assert "above the limit of 1,048,576" in _refused(proc, "big.yaml")


def test_the_project_config_that_is_a_fifo_or_runs_templates_is_refused(workdir: Path) -> None:
    config = workdir / "config/config.yaml"
    text = config.read_text()
    config.write_text('__use_yte__: true\nprofile: ?__import__("pathlib").Path("yte-ran").touch() or "smoke"\n'
                      + text.replace("profile: paper\n", ""))
    proc = snakemake(["-n", *SMOKE], workdir, timeout=120)
    assert "__use_yte__" in _refused(proc, "config/config.yaml") and not (workdir / "yte-ran").exists()
    config.unlink()
    os.mkfifo(config)
    proc = snakemake(["-n", *SMOKE], workdir, timeout=120)  # a reader would wait for a writer for ever
    assert "is a named pipe (FIFO), not a regular file" in _refused(proc, "config/config.yaml")


# The checks themselves, without Snakemake.
@pytest.mark.parametrize(("key", "value", "message"), [
    ("algorithm", "algorithms/./grey322-11-50.txt", "algorithm 'algorithms/./grey322-11-50.txt': a path with"),
    ("algorithm", "strassen+../x.txt", "algorithm 'strassen+../x.txt': a path with"),
    ("algorithm", "strassen+/x.txt", "an absolute path"),
    ("algorithm", "~/x.txt", "an absolute path"),
    ("algorithms", ["{x}.txt"], "algorithms[0] '{x}.txt': holds a brace"),
    ("algorithms", ["-h"], "algorithms[0] '-h': starts with '-'"),
    ("algorithms", ["a//b.txt"], "a path with an empty"),
    ("algorithms", [f"{'a' * 200}.txt"], "a name of 204 bytes, more than 120"),
    ("algorithms", ["é" * 61], "a name of 122 bytes"),
    ("tensor_impls", ["../x.txtx1-tf32"], "tensor_impls[0]"),
    ("accuracy_impls", ["gemm", "/x.txtx1"], "accuracy_impls[1]"),
])
def test_names_that_leave_their_folder_are_refused(key: str, value: object, message: str) -> None:
    import yaml

    from strassenbench.workflow_config import WorkflowConfigError, check_names

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    check_names(config)
    config[key] = value
    with pytest.raises(WorkflowConfigError, match="^config: " + key) as err:
        check_names(config)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("folder", "message"), [
    ("data", "not a folder inside"),
    ("build/x", "not a folder inside"),
    ("data/../../x", "'.' or '..' folder"),
    ("data/./x", "an empty, '.' or '..' folder"),
    ("/work/data/x", "an absolute path"),
])
def test_compare_folders_outside_the_project_folders_are_refused(folder: str, message: str) -> None:
    from strassenbench.workflow_config import WorkflowConfigError, check_compare

    with pytest.raises(WorkflowConfigError, match=r"config: compare\[0\]") as err:
        check_compare([folder])
    assert message in str(err.value)


def test_compare_folders_through_a_link_out_twice_or_into_the_comparison_are_refused(tmp_path: Path,  # noqa: ANN001
                                                                                        monkeypatch) -> None:
    """Checked before any job runs: a link that leaves the project, one folder given twice (however spelled), and
    the comparison's own folder, which the compare job would refuse only after the sweeps."""
    from strassenbench.workflow_config import WorkflowConfigError, check_compare

    (tmp_path / "outside").mkdir()
    project = tmp_path / "project"
    for folder in ("data/gpu", "report/compare/x"):
        (project / folder).mkdir(parents=True)
    (project / "data" / "link").symlink_to(tmp_path / "outside")
    monkeypatch.chdir(project)
    for folders, message in ((["data/link"], "compare[0] 'data/link' leads outside the project"),
                             (["data/gpu", "data/gpu/"], "compare[0] and compare[1] are one folder"),
                             (["report/compare"], "is inside report/compare/"),
                             (["data/gpu", "report/compare/x"], "compare[1] 'report/compare/x' is inside")):
        with pytest.raises(WorkflowConfigError, match=r"config: compare") as err:
            check_compare(folders)
        assert message in str(err.value), err.value
    check_compare(["data/gpu"])


def test_the_config_checks_name_the_key() -> None:
    from strassenbench.workflow_config import (WorkflowConfigError, check_bounded, check_compare, check_strings,
                                               listed_gpus, number_as_text)

    shared = ["x"] * 10
    for _ in range(6):
        shared = [shared] * 10
    with pytest.raises(WorkflowConfigError, match=r"config: compare\[0\].*more than 100000 values"):
        check_bounded({"compare": shared})
    nested: list = []
    for _ in range(40):
        nested = [nested]
    with pytest.raises(WorkflowConfigError, match="nested deeper than 32"):
        check_bounded({"streams": nested})
    check_bounded({"streams": [2, 4]})
    with pytest.raises(WorkflowConfigError, match=r"profiles.smoke.sweeps.square.sizes = '64\\r'"):
        check_strings({"profiles": {"smoke": {"sweeps": {"square": {"sizes": "64\r"}}}}})
    with pytest.raises(WorkflowConfigError, match="compare folder 'data/nothere' does not exist"):
        check_compare(["data/nothere"])
    gpus = listed_gpus(["NVIDIA H100 80GB HBM3@sm_90@h100", "V100@sm_70"], "gpus")
    assert {k: v["arch"] for k, v in gpus.items()} == {"nvidia-h100-80gb-hbm3": "sm_90", "v100": "sm_70"}
    config = {"driver_cuda": 12.1}
    number_as_text(config, "driver_cuda", [], ["profile=smoke", "driver_cuda=12.10"])
    assert config == {"driver_cuda": "12.10"}
    config = {"driver_cuda": 12.5}
    number_as_text(config, "driver_cuda", [], None)
    assert config == {"driver_cuda": "12.5"}
