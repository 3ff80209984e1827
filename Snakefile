# strassenbench: reproduce FLAME Working Note #88 ("Implementing Strassen's Algorithm with CUTLASS on
# NVIDIA Volta GPUs"). `snakemake --cores 1` runs it; `--config profile=smoke` picks the small grid.
from snakemake.utils import min_version, validate

import yaml

from strassenbench.configfile import ConfigFileError, check_config_file, check_finite, schema_error, yaml_types
from strassenbench.workflow_config import WorkflowConfigError, check_bounded, check_strings, number_as_text, refuse

min_version("8.0")

# A missing file, a YAML error or a key given twice: one line naming file, line and column; a file that is too
# big, not a regular file, or whose aliases expand too far is refused before the configfile directive reads it.
CONFIG_FILES = ["config/config.yaml", *getattr(workflow, "overwrite_configfiles", [])]
try:
    for path in CONFIG_FILES:
        check_config_file(path)
except ConfigFileError as err:
    refuse(str(err))


configfile: "config/config.yaml"


SCHEMA = "workflow/schemas/config.schema.yaml"
with open(SCHEMA) as _schema:
    _rules = yaml.safe_load(_schema)
try:
    check_bounded(config)  # --config values too: YAML aliases in them expand before anything walks the config
    number_as_text(config, "driver_cuda", CONFIG_FILES, workflow.config_settings.config_args)  # 12.4, as written
    config.update(yaml_types(dict(config), _rules))  # --config values with their YAML types
    check_bounded(config)
    check_strings(config)  # "paper\n" would pass the schema's patterns
except WorkflowConfigError as err:
    refuse(str(err))
_problem = schema_error(config, _rules)  # a schema violation (key, value, what is allowed), not the schema dump
if _problem:
    refuse(_problem)
try:
    check_finite(config)
except ConfigFileError as err:
    refuse(str(err))
validate(config, schema=SCHEMA)  # fills in the schema's defaults


wildcard_constraints:
    device="[a-z0-9]+(-[a-z0-9]+)*",  # a device folder (strassenbench.device.slug): no other target matches


include: "workflow/rules/devices.smk"
include: "workflow/rules/cases.smk"
include: "workflow/rules/timing.smk"
include: "workflow/rules/targets.smk"
include: "workflow/rules/forecast.smk"
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
