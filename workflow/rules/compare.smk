# This run beside other GPUs' results (config key compare: [data/<gpu>, ...]).


rule compare:
    input:
        f"data/{DEVICE}/square.csv",
    output:
        "report/compare/index.html",
    log:
        "logs/compare.log",
    conda:
        "../../environment.yml"
    params:
        folders=lambda wc, input: " ".join([os.path.dirname(input[0]), *config["compare"]]),
    shell:
        "strassenbench compare {params.folders} --out report/compare > {log} 2>&1"
