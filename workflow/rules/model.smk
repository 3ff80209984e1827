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
    params:
        gpu=MODEL_GPU,
        sizes=lambda wc: config["profiles"]["paper"]["sweeps"][wc.sweep]["sizes"],
    wildcard_constraints:
        sweep="square|rankk|panel",
    shell:
        "strassenbench model predict --gpu {params.gpu} --sweep {wildcards.sweep} --sizes {params.sizes} "
        "--resources {input} --out {output} > {log} 2>&1"


rule model_crossover:
    output:
        "data/{device}/model_crossover.csv",
    log:
        "logs/{device}/model_crossover.log",
    conda:
        "../../environment.yml"
    shell:
        "strassenbench model crossover --gpu V100 --gpu A100 --gpu H100 --out {output} > {log} 2>&1"
