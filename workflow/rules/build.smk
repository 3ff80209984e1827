# The fused kernels compiled for every architecture by the toolchain the driver needs (nvcc 13, or NVRTC 12 for
# sm_70 and CUDA 12 drivers), with what the GPU compiler did (resources.csv).

BUILD_MESSAGE = (
    f"build: compiling the fused kernels ({', '.join(GRID['build']['strategies'])}; "
    f"{', '.join(GRID['build']['dtypes'])}) and the CUTLASS baseline for {', '.join(ARCHS)}"
    + (" for the GPU to run" if BACKEND == "cuda" else
       ": no GPU here, so nothing will run them; their machine code is read for resources.csv (registers, "
       "spills, blocks per SM, instructions per k_S slice), which the model's occupancy and the report's "
       "kernel tables use, and the CPU emulator runs the same sources")
)


rule build:
    output:
        "build/resources.csv",
    message:
        BUILD_MESSAGE
    log:
        "logs/build.log",
    conda:
        "../../environment.yml"
    params:  # lists of words, each quoted for the shell by :q
        archs=[w for a in ARCHS for w in ("--arch", a)],
        dtypes=[w for d in GRID["build"]["dtypes"] for w in ("--dtype", d)],
        strategies=[w for s in GRID["build"]["strategies"] for w in ("--strategy", s)],
        driver=["--driver-cuda", config["driver_cuda"]] if config["driver_cuda"] else [],
        plans=kernel_plans(),
    shell:
        "strassenbench build {params.archs:q} {params.dtypes:q} {params.strategies:q} {params.driver:q} "
        "{params.plans:q} --out build > {log:q} 2>&1"
