# Stream schedules computed by the algebra (paper, figure tab:gpu_streaming) for each configured stream count.


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
