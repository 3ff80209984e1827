# The largest square problem per implementation (paper: 36,000 vs 22,500 on a 16 GB V100).


rule memlimit:
    input:
        lambda wc: ["build/resources.csv"] if BACKEND == "cuda" else [],
    output:
        "results/{device}/memlimit.csv",
    log:
        "logs/{device}/memlimit.log",
    conda:
        "../../environment.yml"
    resources:
        gpu=GPU_JOB,
        gpu_model=gpu_model,
        slurm_extra=TIMING_NODE,
    params:
        engine=BACKEND,
        expect=expect_device,
        impls=",".join(run_impls()),
        step=GRID["memlimit"]["step"],
        budget=(["--memory-budget", GRID["memlimit"]["budget"]] if GRID["memlimit"].get("budget") else []),
    shell:
        "strassenbench memlimit --engine {params.engine:q} --impl {params.impls:q} --step {params.step:q} "
        "{params.budget:q} {params.expect:q} --out {output:q} > {log:q} 2>&1"


rule collect_memlimit:
    """Published to data/ only once the experiment succeeded (a failed job never deletes the last result)."""
    input:
        "results/{device}/memlimit.csv",
    output:
        "data/{device}/memlimit.csv",
    log:
        "logs/{device}/collect_memlimit.log",
    conda:
        "../../environment.yml"
    shell:
        "strassenbench collect {input:q} --out {output:q} > {log:q} 2>&1"
