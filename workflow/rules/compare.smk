# This run beside other GPUs' results: the other devices of this run (config key gpus) and the folders of
# config key compare ([data/<gpu>, ...]).


rule compare:
    input:
        [f"data/{device}/square.csv" for device in DEVICES],
    output:
        "report/compare/index.html",
    log:
        "logs/compare.log",
    conda:
        "../../environment.yml"
    params:
        folders=lambda wc, input: [*(os.path.dirname(f) for f in input), *config["compare"]],
    shell:
        "strassenbench compare {params.folders:q} --out report/compare > {log:q} 2>&1"
