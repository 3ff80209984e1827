# The fused kernels compiled for every architecture by the toolchain the driver needs (nvcc 13, or NVRTC 12 for
# sm_70 and CUDA 12 drivers), with what the GPU compiler did (resources.csv).


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
        driver=f"--driver-cuda {config['driver_cuda']}" if config["driver_cuda"] else "",
        plans=kernel_plans(),
    shell:
        "strassenbench build {params.archs} {params.dtypes} {params.strategies} {params.driver} {params.plans} "
        "--out build "
        "> {log} 2>&1"
