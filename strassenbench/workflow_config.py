"""The workflow's config, checked where it decides paths and the words of shell commands: a bounded size (YAML
aliases expanded), no control character or surrounding blank in any string, names of algorithms and
implementations that stay inside the project's folders, compare folders inside results/, data/ or report/, and
GPUs whose device folders are non-empty and distinct. Every problem is a WorkflowConfigError of one line naming
the key; the Snakefile stops with it (`refuse`). (The rules quote every value they give a shell command.)"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

import yaml

from strassenbench.configfile import MAX_DEPTH, MAX_VALUES

__all__ = ["WorkflowConfigError", "refuse", "ROOTS", "MAX_NAME", "check_bounded", "check_strings", "number_as_text",
           "check_names", "check_compare", "listed_gpus"]

ROOTS = ("results", "data", "report")  # the folders the workflow writes (besides build/ and logs/)
MAX_NAME = 120  # bytes of one folder or file name taken from the config (the rules add suffixes to it)
MAX_TEXT = 1024  # characters of one name or folder
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class WorkflowConfigError(ValueError):
    """A config value the workflow cannot use, in one line naming the key."""


def refuse(message: str) -> NoReturn:
    """Stop the workflow on bad input before any job: ``message`` in one line on stderr (its lines joined), exit
    status 2, no traceback. (An exception raised while Snakemake reads the Snakefile is reported with its frames
    and exit status 1; SystemExit passes through Snakemake untouched.)"""
    print("; ".join(line.strip() for line in str(message).splitlines() if line.strip()), file=sys.stderr, flush=True)
    raise SystemExit(2)


def check_bounded(value: object, where: str = "config") -> None:
    """WorkflowConfigError where the config holds more than MAX_VALUES values (shared values, as YAML aliases
    make them, counted each time) or nests deeper than MAX_DEPTH; the walk stops at the first value over."""
    count = 0

    def visit(item: object, key: str, depth: int) -> None:
        nonlocal count
        count += 1
        if count > MAX_VALUES:
            raise WorkflowConfigError(f"config: {key}: more than {MAX_VALUES} values (YAML aliases expanded)")
        if depth > MAX_DEPTH:
            raise WorkflowConfigError(f"config: {key}: nested deeper than {MAX_DEPTH} levels")
        children = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        for name, child in children:
            visit(child, _key(key, name), depth + 1)

    visit(value, where, 0)


def check_strings(value: object, where: str = "config") -> None:
    """WorkflowConfigError for a string holding a line break or another control character, or starting or
    ending with a blank (``"paper\\n"`` once passed the schema's patterns and then failed as a KeyError)."""
    if isinstance(value, str):
        if _CONTROL.search(value):
            raise WorkflowConfigError(f"config: {where} = {value[:80]!r}: a line break or control character")
        if value != value.strip():
            raise WorkflowConfigError(f"config: {where} = {value[:80]!r}: starts or ends with a blank")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_strings(item, _key(where, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_strings(item, _key(where, i))


def number_as_text(config: dict, key: str, files: Iterable[str | Path], args: Iterable[str] | None) -> None:
    """A version given as a number (``--config driver_cuda=12.4``, or unquoted in a file) as the text it was
    written with: YAML and Snakemake read 12.10 as the float 12.1, so the text is taken from where the value was
    given (the last of the config files, then of ``--config``), else from the number."""
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    text = None
    for path in files:
        text = _top_level_text(Path(path), key) or text
    for arg in args or ():
        if isinstance(arg, str) and arg.startswith(f"{key}="):
            text = arg.split("=", 1)[1].strip("'\"")  # as Snakemake reads it
    config[key] = text if text is not None else repr(value)


def _top_level_text(path: Path, key: str) -> str | None:
    """The text of a top-level plain value of a YAML file (already checked by check_config_file), or None."""
    node = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    if not isinstance(node, yaml.MappingNode):
        return None
    found = [v.value for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key
             and isinstance(v, yaml.ScalarNode)]
    return found[-1] if found else None


def check_names(config: dict) -> None:
    """Names that become folder and file names (results/<device>/verify/<algorithm>_L..., parts/<impl>.csv,
    logs/...): each part of an algorithm spec (a name or a coefficient file's path) relative, without an empty,
    '.' or '..' folder, at most MAX_NAME bytes a name; no Snakemake wildcard braces; no leading '-'."""
    listed = [("algorithm", config["algorithm"])]
    for key in ("algorithms", "impls", "controls", "tensor_impls", "accuracy_impls"):
        listed += [(f"{key}[{i}]", name) for i, name in enumerate(config[key])]
    for profile, grid in config["profiles"].items():
        if isinstance(grid.get("tensorcore"), list):
            listed += [(f"profiles.{profile}.tensorcore[{i}]", n) for i, n in enumerate(grid["tensorcore"])]
    for key, name in listed:
        why = _name_problem(name)
        if why:
            raise WorkflowConfigError(f"config: {key} {name[:80]!r}: {why}")


def _name_problem(name: str) -> str | None:
    if len(name) > MAX_TEXT:
        return f"longer than {MAX_TEXT} characters"
    if name.startswith("-"):
        return "starts with '-' (it would be read as an option)"
    if "{" in name or "}" in name:
        return "holds a brace (Snakemake reads braces in file names as wildcards)"
    if not name:
        return "an empty name"
    for part in filter(None, name.split("+")):  # an empty part is the spec parser's to refuse
        why = _path_problem(part)
        if why:
            return why
    return None


def _path_problem(path: str) -> str | None:
    """Why a relative path given in the config could lead out of the folder it is put in, or None."""
    if not path:
        return "an empty name"
    if path.startswith("/") or path.startswith("~"):
        return "an absolute path (give it relative to the project)"
    parts = path.removesuffix("/").split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "a path with an empty, '.' or '..' folder (it must stay inside the project)"
    longest = max(parts, key=lambda part: len(part.encode()))
    if len(longest.encode()) > MAX_NAME:
        return f"a name of {len(longest.encode())} bytes, more than {MAX_NAME}"
    return None


COMPARE_OUT = "report/compare"  # the compare rule's --out (workflow/rules/compare.smk)


def check_compare(folders: list[str]) -> None:
    """Every compare folder is a folder inside results/, data/ or report/ of the project (data/<gpu>), there
    (through no link that leaves the project), given once, and not the comparison's own folder."""
    project, seen = Path.cwd().resolve(), {}
    for i, folder in enumerate(folders):
        why = _path_problem(folder) if len(folder) <= MAX_TEXT else f"longer than {MAX_TEXT} characters"
        if why is None and (folder.split("/")[0] not in ROOTS or len(folder.removesuffix("/").split("/")) < 2):
            why = f"not a folder inside {', '.join(r + '/' for r in ROOTS)} (e.g. data/<gpu>)"
        if why:
            raise WorkflowConfigError(f"config: compare[{i}] {folder[:80]!r}: {why}")
        if not os.path.isdir(folder):
            raise WorkflowConfigError(f"config: compare folder {folder!r} does not exist")
        real = Path(folder).resolve()
        if project not in real.parents:
            raise WorkflowConfigError(f"config: compare[{i}] {folder!r} leads outside the project (a link?)")
        if real == (project / COMPARE_OUT).resolve() or (project / COMPARE_OUT).resolve() in real.parents:
            raise WorkflowConfigError(f"config: compare[{i}] {folder!r} is inside {COMPARE_OUT}/, where the "
                                      "comparison is written")
        if real in seen:
            raise WorkflowConfigError(f"config: compare[{seen[real]}] and compare[{i}] are one folder, {folder!r}")
        seen[real] = i


def listed_gpus(entries: list[str], key: str) -> dict[str, dict]:
    """'NAME@sm_XY[@MODEL]' entries -> {device folder: {name, arch: the build it runs, model: the scheduler's GPU
    type}}; a name with no letter or digit, two names of one folder, or an architecture without a build are
    refused naming the entries."""
    from strassenbench.device import slug
    from strassenbench.fused.arch import CudaError, build_arch

    gpus: dict[str, dict] = {}
    given: dict[str, str] = {}
    for i, text in enumerate(entries):
        where = f"{key}[{i}]" if key == "gpus" else key
        name, arch, model = (text.split("@") + [""])[:3]
        device = slug(name)
        if not device:
            raise WorkflowConfigError(f"config: {where} {text!r}: the name has no letter or digit for its "
                                      "folder data/<name>/")
        if len(device.encode()) > MAX_NAME:
            raise WorkflowConfigError(f"config: {where}: a name of {len(device)} bytes, more than {MAX_NAME}")
        if device in gpus:
            raise WorkflowConfigError(f"config: {given[device]} {gpus[device]['entry']!r} and {where} {text!r} are "
                                      f"both data/{device}/: give each GPU a distinct name")
        try:
            built = build_arch(arch[len("sm_"):])
        except CudaError as err:
            raise WorkflowConfigError(f"config: {where} {text!r}: {err}") from None
        gpus[device] = {"name": name, "arch": built, "model": model, "entry": text}
        given[device] = where
    return gpus


def _key(where: str, name: object) -> str:
    if isinstance(name, int):
        return f"{where}[{name}]"
    return str(name) if where == "config" else f"{where}.{name}"
