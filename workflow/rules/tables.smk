# Tables computed by the algebra: variants (figure tab:perfeq_level2) and stream stages (tab:gpu_streaming).


rule variants_table:
    output:
        "report/tables/variants_L{levels}.md",
    log:
        "logs/tables/variants_L{levels}.log",
    conda:
        "../../environment.yml"
    params:
        algorithm=config["algorithm"],
    shell:
        "strassenbench variants --levels {wildcards.levels} --algorithm {params.algorithm} "
        "--format markdown --out {output} > {log} 2>&1"


rule schedule_table:
    output:
        "report/tables/schedule_L{levels}_S{streams}.md",
    log:
        "logs/tables/schedule_L{levels}_S{streams}.log",
    conda:
        "../../environment.yml"
    params:
        algorithm=config["algorithm"],
    shell:
        "strassenbench schedule --levels {wildcards.levels} --streams {wildcards.streams} "
        "--algorithm {params.algorithm} --format markdown --out {output} > {log} 2>&1"
