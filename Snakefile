# strassenbench: reproduce FLAME Working Note #88 ("Implementing Strassen's Algorithm with CUTLASS on
# NVIDIA Volta GPUs"). `snakemake --cores 1` runs it; `--config profile=smoke` picks the small grid.
from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

from strassenbench.configfile import ConfigFileError, check_config_file

min_version("8.0")

try:  # a missing file or a YAML error: one line naming file, line and column
    check_config_file("config/config.yaml")
except ConfigFileError as err:
    raise WorkflowError(str(err)) from None


configfile: "config/config.yaml"


validate(config, schema="workflow/schemas/config.schema.yaml")


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
