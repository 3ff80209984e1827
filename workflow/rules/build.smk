# The fused kernels compiled by nvcc for every architecture, with what the GPU compiler did (resources.csv).


rule build:
    output:
        "build/resources.csv",
    log:
        "logs/build.log",
    conda:
        "../../environment.yml"
    params:
        archs=" ".join(f"--arch {a}" for a in ARCHS),
        dtypes=" ".join(f"--dtype {d}" for d in GRID["build"]["dtypes"]),
        strategies=" ".join(f"--strategy {s}" for s in GRID["build"]["strategies"]),
    shell:
        "strassenbench build {params.archs} {params.dtypes} {params.strategies} --out build > {log} 2>&1"
