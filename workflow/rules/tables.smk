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
    wildcard_constraints:
        levels=r"\d+",
        streams=r"\d+",
    shell:
        "strassenbench schedule --levels {wildcards.levels:q} --streams {wildcards.streams:q} "
        "--algorithm {params.algorithm:q} --format markdown --out {output:q} > {log:q} 2>&1"
