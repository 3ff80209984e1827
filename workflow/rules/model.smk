# The performance model's predictions (paper, Sec. s:analysis), labelled source=model in every row, and its
# tables: every model number of the report is read from these files (data/<device>/model_*.csv).


MODEL_GPU_RESOURCES = dict(  # querying a GPU's attributes needs it
    gpu=lambda wc: GPU_JOB if model_gpu(wc) == "device" else 0,
    gpu_model=gpu_model,
    # On SLURM the GPU partition only for that (the profile's partitions are gpu and cpu, its default).
    slurm_partition=lambda wc: "gpu" if model_gpu(wc) == "device" else "cpu",
)


rule model_predict:
    """The sweeps' predictions, best strategy per point, their fused products run by the configured scheme (the
    one a GPU run times the sweeps with: strassenbench.model.schemes; a CPU run's stand-ins take no scheme)."""
    input:
        "build/resources.csv",
    output:
        "data/{device}/model_{sweep}.csv",
    log:
        "logs/{device}/model_{sweep}.log",
    conda:
        "../../environment.yml"
    resources:
        **MODEL_GPU_RESOURCES,
    params:
        gpu=model_gpu,
        sizes=lambda wc: config["profiles"]["paper"]["sweeps"][wc.sweep]["sizes"],
        impls=model_impls(),
        scheme=config["scheme"],
    wildcard_constraints:
        sweep="square|rankk|panel",
    shell:
        "strassenbench model predict --gpu {params.gpu:q} --sweep {wildcards.sweep:q} --sizes {params.sizes:q} "
        "--impl {params.impls:q} --scheme {params.scheme:q} --resources {input:q} --out {output:q} > {log:q} 2>&1"


rule model_strategies:
    """fig:model_square's curves: GEMM and direct 1- and 2-level Strassen with the Huge and Small strategies, by
    the model and with global traffic through the L2 (what the paper's Sec. s:perf_discuss finds it missing)."""
    input:
        "build/resources.csv",
    output:
        "data/{device}/model_strategies.csv",
    log:
        "logs/{device}/model_strategies.log",
    conda:
        "../../environment.yml"
    resources:
        **MODEL_GPU_RESOURCES,
    params:
        gpu=model_gpu,
        sizes=config["profiles"]["paper"]["sweeps"]["square"]["sizes"],
        impls=",".join(MODEL_SQUARE_IMPLS),
        strategies=[word for s in MODEL_SQUARE_STRATEGIES for word in ("--strategy", s)],
    shell:
        "strassenbench model predict --gpu {params.gpu:q} --sweep square --sizes {params.sizes:q} "
        "--impl {params.impls:q} {params.strategies:q} --model issue --model l2 "
        "--resources {input:q} --out {output:q} > {log:q} 2>&1"


rule model_speedup:
    """Where each implementation of the three sweeps' predictions overtakes the GEMM, and its best speedup."""
    input:
        expand("data/{{device}}/model_{sweep}.csv", sweep=SWEEPS),
    output:
        "data/{device}/model_speedup.csv",
    log:
        "logs/{device}/model_speedup.log",
    conda:
        "../../environment.yml"
    shell:
        "strassenbench model speedup {input:q} --out {output:q} > {log:q} 2>&1"


rule model_gpu_tables:
    """The model GPU's parameters beside the paper's V100 (tab:notation), and its blocking bounds."""
    output:
        spec="data/{device}/model_spec.csv",
        bounds="data/{device}/model_bounds.csv",
    log:
        "logs/{device}/model_gpu_tables.log",
    conda:
        "../../environment.yml"
    resources:
        **MODEL_GPU_RESOURCES,
    params:
        gpu=model_gpu,
    shell:
        "(strassenbench model spec --gpu V100 --gpu {params.gpu:q} --out {output.spec:q} && "
        "strassenbench model bounds --gpu {params.gpu:q} --out {output.bounds:q}) > {log:q} 2>&1"


rule model_build_tables:
    """From the build's machine code: the occupancy footnote's kernels per architecture, and the issue-slot
    bounds of every built-in GPU model at m = k = n = 20480."""
    input:
        "build/resources.csv",
    output:
        occupancy="data/{device}/model_occupancy.csv",
        issue="data/{device}/model_issue_bounds.csv",
    log:
        "logs/{device}/model_build_tables.log",
    conda:
        "../../environment.yml"
    shell:
        "(strassenbench model occupancy --resources {input:q} --out {output.occupancy:q} && "
        "strassenbench model issue-bounds --resources {input:q} --size 20480 --out {output.issue:q}) > {log:q} 2>&1"


rule model_validate:
    """GPU runs: the model (issue and l2) against the run's measured sweeps, per implementation: predicted /
    measured time, and the error in the speedup over the GEMM, with each point's scheme and with the products one
    after another (the report's model validation table)."""
    input:
        sweeps=expand("data/{{device}}/{sweep}.csv", sweep=SWEEP_NAMES),
        resources="build/resources.csv",
    output:
        "data/{device}/model_validate.csv",
    log:
        "logs/{device}/model_validate.log",
    conda:
        "../../environment.yml"
    resources:
        **MODEL_GPU_RESOURCES,
    params:
        gpu=model_gpu,
    shell:
        "strassenbench model validate {input.sweeps:q} --gpu {params.gpu:q} --model issue --model l2 "
        "--resources {input.resources:q} --out {output:q} > {log:q} 2>&1"


rule model_crossover:
    output:
        "data/{device}/model_crossover.csv",
    log:
        "logs/{device}/model_crossover.log",
    conda:
        "../../environment.yml"
    params:
        impls=crossover_impls(),
    shell:
        "strassenbench model crossover --gpu V100 --gpu A100 --gpu H100 --impl {params.impls:q} --out {output:q} "
        "> {log:q} 2>&1"


rule model_winners:
    """pick's first per size and precision mode on the paper's three sweeps, for every built-in GPU model and the
    device's (the report's winners figure and table): at the strategies figure's sizes and at 2,048, 8,192 and
    16,384. The fused products one after another (pick's default scheme): pick predicts cuBLAS as our GEMM, whose
    partial last wave the model charges in full where cuBLAS would pick a tile that fills the GPU, so with the
    atomic scheme small sizes crown splits of the GEMM (V100, 1,024: the 8-product classical 2x2x2 at 1.84x)."""
    input:
        "build/resources.csv",
    output:
        "data/{device}/model_winners.csv",
    log:
        "logs/{device}/model_winners.log",
    conda:
        "../../environment.yml"
    resources:
        **MODEL_GPU_RESOURCES,
    params:
        gpus=lambda wc: " ".join(f"--gpu {g}" for g in dict.fromkeys(["V100", "A100", "H100", model_gpu(wc)])),
        sizes=winner_sizes,
    shell:
        "strassenbench model winners {params.gpus} --sizes {params.sizes:q} --resources {input:q} "
        "--out {output:q} > {log:q} 2>&1"
