"""The workflow's config, checked where Snakemake's own messages fall short: a missing file, a YAML error or a
key given twice is one line naming the file, the line and the column; a file over 1 MiB, one that is not a
regular file, one whose aliases expand to more than 100,000 values or nest deeper than 32 levels, and one that
asks for Snakemake's templates (``__use_yte__``, which run Python) are refused before Snakemake reads it; values
given with ``--config`` are read with their YAML types; a schema violation is at most three lines naming the key,
the value and what is allowed (instead of the schema dump); NaN and infinities are refused."""

from __future__ import annotations

from pathlib import Path

import yaml

from .readers import read_text

__all__ = ["ConfigFileError", "check_config_file", "yaml_types", "schema_error", "check_finite", "MAX_BYTES",
           "MAX_VALUES", "MAX_DEPTH"]

MAX_BYTES = 1 << 20  # a config file (config/config.yaml is some 4 KB)
MAX_VALUES = 100_000  # values of a config with every YAML alias expanded
MAX_DEPTH = 32  # nesting of mappings and lists


class ConfigFileError(ValueError):
    """A config file that does not exist or is not valid YAML."""


def check_config_file(path: str | Path) -> None:
    path = Path(path)
    # a regular file of at most MAX_BYTES (a FIFO or a device is refused before it is read)
    text = read_text(path, limit=MAX_BYTES, what="a config file", error=ConfigFileError)
    loader = _UniqueKeys(text)  # a SafeLoader that refuses duplicate keys
    try:
        node = loader.get_single_node()  # composed, aliases not expanded: their size is counted first
        _check_expansion(node, path)
        data = loader.construct_document(node) if node is not None else None
    except RecursionError:
        raise ConfigFileError(f"config file {path}: nested deeper than {MAX_DEPTH} levels") from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise ConfigFileError(f"config file {path}, {where}: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise ConfigFileError(f"config file {path}: {err}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ConfigFileError(f"config file {path}: not a mapping of keys to values")
    if "__use_yte__" in data:
        raise ConfigFileError(f"config file {path}: __use_yte__ (Snakemake's templates, which run Python) is not "
                              "accepted: give the values themselves")


def _check_expansion(root: yaml.Node | None, path: Path) -> None:
    """ConfigFileError where the document, its aliases expanded, holds more than MAX_VALUES values, nests
    deeper than MAX_DEPTH, or refers to itself (an alias inside its own anchor). Each node is sized once."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise ConfigFileError(f"config file {path}, line {node.start_mark.line + 1}: nested deeper than "
                                  f"{MAX_DEPTH} levels (or an alias inside its own anchor)")
        if id(node) not in sizes:
            children = node.value if isinstance(node, yaml.SequenceNode) else \
                [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else []
            total = 1 + sum(size(child, depth + 1) for child in children)
            if total > MAX_VALUES:
                raise ConfigFileError(f"config file {path}, line {node.start_mark.line + 1}: more than {MAX_VALUES} "
                                      "values with its aliases expanded")
            sizes[id(node)] = total
        return sizes[id(node)]

    if root is not None:
        size(root, 0)


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML lets the last silently win)."""

    def construct_mapping(self, node, deep=False):  # noqa: ANN001, ANN201
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def yaml_types(value: object, schema: dict, root: dict | None = None) -> object:
    """``value`` with every string that the schema wants as another type read as YAML (``--config
    'streams=[2]'`` arrives as ['2']); strings that do not parse are left for the schema to refuse."""
    root = schema if root is None else root
    if "$ref" in schema:  # a local reference, "#/definitions/grid"
        target = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target.get(part, {})
        schema = target
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else (kinds or [])
    if isinstance(value, str) and kinds and "string" not in kinds:
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        return yaml_types(parsed, schema, root) if not isinstance(parsed, str) else value
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        return {k: yaml_types(v, properties.get(k, extra if isinstance(extra, dict) else {}), root)
                for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [yaml_types(v, schema["items"], root) for v in value]
    return value


def schema_error(config: dict, schema: dict) -> str | None:
    """The config's first schema violation in at most three lines (key, value, what is allowed), or None."""
    import jsonschema

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.validator == "additionalProperties":
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"config: unknown key {', '.join(map(repr, unknown))} in {where}\n  allowed: {allowed}"
    value = repr(error.instance)
    allowed = error.schema.get("description", "")
    if "enum" in error.schema:
        allowed = "one of " + ", ".join(map(str, error.schema["enum"]))
    message = f"config: {where} = {value[:80]}: {error.message[:200]}"
    return message + (f"\n  allowed: {allowed[:200]}" if allowed else "")


def check_finite(value: object, where: str = "config") -> None:
    """ConfigFileError for a NaN or an infinity anywhere in the config (YAML's .nan, .inf)."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigFileError(f"config: {where} = {value}: not a finite number")
    if isinstance(value, dict):
        for key, item in value.items():
            check_finite(item, f"{where}.{key}" if where != "config" else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_finite(item, f"{where}[{i}]")
