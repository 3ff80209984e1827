# strassenbench: reproduce FLAME Working Note #88 ("Implementing Strassen's Algorithm with CUTLASS on
# NVIDIA Volta GPUs"). `snakemake --cores 1` runs it; `--config profile=smoke` picks the small grid.
from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

import yaml

from strassenbench.configfile import ConfigFileError, check_config_file, check_finite, schema_error, yaml_types

min_version("8.0")

try:  # a missing file, a YAML error or a key given twice: one line naming file, line and column
    for path in ["config/config.yaml", *getattr(workflow, "overwrite_configfiles", [])]:
        check_config_file(path)
except ConfigFileError as err:
    raise WorkflowError(str(err)) from None


configfile: "config/config.yaml"


SCHEMA = "workflow/schemas/config.schema.yaml"
with open(SCHEMA) as _schema:
    _rules = yaml.safe_load(_schema)
config.update(yaml_types(dict(config), _rules))  # --config values with their YAML types
_problem = schema_error(config, _rules)  # a schema violation in at most three lines, not the schema dump
if _problem:
    raise WorkflowError(_problem)
try:
    check_finite(config)
except ConfigFileError as err:
    raise WorkflowError(str(err)) from None
validate(config, schema=SCHEMA)  # fills in the schema's defaults


include: "workflow/rules/common.smk"
include: "workflow/rules/build.smk"
include: "workflow/rules/verify.smk"
include: "workflow/rules/sweep.smk"
include: "workflow/rules/memlimit.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/tables.smk"


# Steps of a second or two that only join or render small files: on a cluster they run on the submitting host
# instead of waiting in the queue as jobs of their own.
localrules:
    all,
    collect_sweep,
    collect_verify,
    collect_verify_impls,
    collect_memlimit,
    schedule_table,
    model_crossover,


rule all:
    input:
        all_outputs(),
