# Timed sweeps (paper, Sec. s:gpu_exp): one job per (sweep, implementation), one GPU per job. A job's
# results accumulate in results/ (not a declared output, so an interrupted job keeps its finished points and
# the rerun resumes them); its part goes to results/ too, and data/ is written only by the collect step
# after every part succeeded, so a failed job never deletes a published result.


rule sweep:
    input:
        lambda wc: ["build/resources.csv"] if BACKEND == "cuda" else [],
    output:
        "results/{device}/parts/{sweep}/{impl}.csv",
    log:
        "logs/{device}/sweep/{sweep}_{impl}.log",
    conda:
        "../../environment.yml"
    resources:
        gpu=GPU_JOB,
        gpu_model=gpu_model,
        slurm_extra=TIMING_NODE,
    params:
        engine=BACKEND,
        expect=expect_device,
        sizes=lambda wc: GRID["sweeps"][wc.sweep]["sizes"],
        fixed=lambda wc: sweep_fixed(wc.sweep),
        timing=timing_args(),
        fused=lambda wc: fused_args(wc.impl),
        dtypes=sweep_dtype_args,
        partial="results/{device}/sweep/{sweep}/{impl}.csv",
    wildcard_constraints:
        sweep="square|rankk|panel",
    shell:
        "strassenbench bench --engine {params.engine:q} --impl {wildcards.impl:q} --sweep {wildcards.sweep:q} "
        "--sizes {params.sizes:q} {params.fixed:q} {params.fused:q} {params.dtypes:q} {params.timing:q} {params.expect:q} "
        "--no-progress --out {params.partial:q} --publish {output:q} > {log:q} 2>&1"


rule collect_sweep:
    input:
        lambda wc: [f"results/{wc.device}/parts/{wc.sweep}/{impl}.csv" for impl in sweep_impls(wc.sweep)],
    output:
        "data/{device}/{sweep}.csv",
    log:
        "logs/{device}/collect_{sweep}.log",
    conda:
        "../../environment.yml"
    wildcard_constraints:
        sweep="square|rankk|panel",
    shell:
        "strassenbench collect {input:q} --out {output:q} > {log:q} 2>&1"


rule strategies:
    """The paper's tuning (GPU runs): our GEMM and every fused SIMT Strassen of the run at each size with every
    strategy up to 4,096 and the model's top three above (--strategy best), Huge and Small always (figure
    fig:model_square's pair), their products one after another (scheme sequential, as the paper ran them); a row
    per strategy, best marking the fastest (collect --by-strategy). CUTLASS (its kernel is the Huge strategy's)
    beside them when the configured implementations include it."""
    input:
        "build/resources.csv",
    output:
        "data/{device}/strategies.csv",
    log:
        "logs/{device}/strategies.log",
    conda:
        "../../environment.yml"
    resources:
        gpu=GPU_JOB,
        gpu_model=gpu_model,
        slurm_extra=TIMING_NODE,
    params:
        expect=expect_device,
        sizes=GRID["model_strategies"]["sizes"],
        timing=timing_args(),
        partial="results/{device}/strategies",
        cutlass=lambda wc: "yes" if "cutlass" in config["impls"] else "no",
        impls=",".join(strategy_impls()),
        request=STRATEGIES_REQUEST,
    shell:
        "(parts=; if [ {params.cutlass:q} = yes ]; then strassenbench bench --engine cuda --impl cutlass "
        "--sweep square --sizes {params.sizes:q} {params.timing:q} {params.expect:q} --no-progress "
        "--out {params.partial:q}/CUTLASS.csv || exit 1; parts={params.partial:q}/CUTLASS.csv; fi; "
        "strassenbench bench --engine cuda --impl {params.impls:q} --sweep square --sizes {params.sizes:q} "
        "--strategy {params.request:q} --scheme sequential {params.timing:q} {params.expect:q} --no-progress "
        "--out {params.partial:q}/best.csv || exit 1; "
        "strassenbench collect $parts {params.partial:q}/best.csv --by-strategy --out {output:q}) > {log:q} 2>&1"


rule sysinfo:
    output:
        "data/{device}/system.json",
    log:
        "logs/{device}/sysinfo.log",
    conda:
        "../../environment.yml"
    resources:
        gpu=GPU_JOB,  # it describes the GPU the device's jobs run on
        gpu_model=gpu_model,
    params:
        engine=BACKEND,
        expect=expect_device,
    shell:
        "strassenbench sysinfo --engine {params.engine:q} {params.expect:q} --out {output:q} > {log:q} 2>&1"
