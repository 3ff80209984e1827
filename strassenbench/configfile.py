"""The workflow's config file, checked before Snakemake reads it: a missing file or a YAML error is one line
naming the file, the line and the column (Snakemake's own message names neither)."""

from __future__ import annotations

from pathlib import Path

import yaml

__all__ = ["ConfigFileError", "check_config_file"]


class ConfigFileError(ValueError):
    """A config file that does not exist or is not valid YAML."""


def check_config_file(path: str | Path) -> None:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigFileError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigFileError(f"config file {path} cannot be read: {err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise ConfigFileError(f"config file {path}, {where}: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise ConfigFileError(f"config file {path}: {err}") from None
    if not isinstance(data, dict):
        raise ConfigFileError(f"config file {path}: not a mapping of keys to values")
