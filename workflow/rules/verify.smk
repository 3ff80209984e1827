# Every implementation is checked against a float64 reference before anything is timed.


rule verify:
    input:
        lambda wc: ["build/resources.csv"] if BACKEND == "cuda" else [],
    output:
        "results/{device}/verify/{algorithm}_L{levels}_{dtype}.csv",
    log:
        "logs/{device}/verify/{algorithm}_L{levels}_{dtype}.log",
    conda:
        "../../environment.yml"
    resources:
        gpu=GPU_JOB,
        gpu_model=gpu_model,
    params:
        engine=BACKEND,
        shapes=[word for shape in GRID["verify"]["shapes"] for word in ("--shape", shape)],
    wildcard_constraints:
        levels=r"\d+",
        dtype=r"float(32|64)",
    shell:
        "strassenbench verify --engine {params.engine:q} --algorithm {wildcards.algorithm:q} "
        "--levels {wildcards.levels:q} {params.shapes:q} "
        "--dtype {wildcards.dtype:q} --alpha 1.5 --beta -0.5 --out {output:q} > {log:q} 2>&1"


rule collect_verify:
    input:
        expand("results/{{device}}/verify/{case}.csv", case=verify_cases()),
    output:
        "data/{device}/verify.csv",
    log:
        "logs/{device}/collect_verify.log",
    conda:
        "../../environment.yml"
    shell:
        "strassenbench collect {input:q} --out {output:q} > {log:q} 2>&1"


rule verify_impl:
    """Every implementation once per dtype; on a CPU run the fused ones run the real kernels on the emulator."""
    input:
        lambda wc: ["build/resources.csv"] if BACKEND == "cuda" else [],
    output:
        "results/{device}/verify_impls/{impl}_{dtype}.csv",
    log:
        "logs/{device}/verify_impls/{impl}_{dtype}.log",
    conda:
        "../../environment.yml"
    resources:
        gpu=GPU_JOB,
        gpu_model=gpu_model,
    params:
        engine=lambda wc: impl_engine(wc.impl),
        shape=lambda wc: impl_shape(),
    shell:
        "strassenbench verify --impl {wildcards.impl:q} --engine {params.engine:q} {params.shape:q} "
        "--dtype {wildcards.dtype:q} --alpha 1.5 --beta -0.5 --out {output:q} > {log:q} 2>&1"


rule collect_verify_impls:
    input:
        lambda wc: [f"results/{wc.device}/verify_impls/{impl}_{dtype}.csv" for impl in run_impls()
                    for dtype in ("float32", "float64") if dtype in impl_dtypes(impl)],
    output:
        "data/{device}/verify_impls.csv",
    log:
        "logs/{device}/collect_verify_impls.log",
    conda:
        "../../environment.yml"
    shell:
        "strassenbench collect {input:q} --out {output:q} > {log:q} 2>&1"


rule accuracy:
    """Beyond the paper: the relative error of SIMT FP32, 1xTF32 and 3xTF32 against float64, and of SIMT FP64 and
    DMMA against an exact product (GEMM, 1- and 2-level Strassen), on uniform and wide-range inputs, each
    implementation in the dtypes it computes; on a CPU run the fused ones run on the emulator."""
    input:
        lambda wc: ["build/resources.csv"] if BACKEND == "cuda" else [],
    output:
        "data/{device}/accuracy.csv",
    log:
        "logs/{device}/accuracy.log",
    conda:
        "../../environment.yml"
    resources:
        gpu=GPU_JOB,
        gpu_model=gpu_model,
    params:
        engine="cuda" if BACKEND == "cuda" else "emu",
        impls=",".join(ACCURACY_RUN),
        sizes=lambda wc: GRID.get("accuracy", {"sizes": "1024"})["sizes"],
    shell:
        "strassenbench accuracy --engine {params.engine:q} --impl {params.impls:q} --sizes {params.sizes:q} "
        "--dtype float32 --dtype float64 --inputs uniform,wide --no-progress --out {output:q} > {log:q} 2>&1"
