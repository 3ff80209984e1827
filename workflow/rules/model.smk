# The performance model's predictions (paper, Sec. s:analysis), labelled source=model in every row.


rule model_predict:
    input:
        "build/resources.csv",
    output:
        "data/{device}/model_{sweep}.csv",
    log:
        "logs/{device}/model_{sweep}.log",
    conda:
        "../../environment.yml"
    resources:
        gpu=lambda wc: GPU_JOB if model_gpu(wc) == "device" else 0,  # querying a GPU's attributes needs it
        gpu_model=gpu_model,
        # On SLURM the GPU partition only for that (the profile's partitions are gpu and cpu, its default).
        slurm_partition=lambda wc: "gpu" if model_gpu(wc) == "device" else "cpu",
    params:
        gpu=model_gpu,
        sizes=lambda wc: config["profiles"]["paper"]["sweeps"][wc.sweep]["sizes"],
    wildcard_constraints:
        sweep="square|rankk|panel",
    shell:
        "strassenbench model predict --gpu {params.gpu:q} --sweep {wildcards.sweep:q} --sizes {params.sizes:q} "
        "--resources {input:q} --out {output:q} > {log:q} 2>&1"


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
