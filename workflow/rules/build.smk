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
