# The report: every figure (PNG and PDF) and table of the paper in report/index.html.


rule report:
    input:
        **report_inputs(),
    output:
        "report/index.html",
        expand("report/figures/{fig}.{ext}",
               fig=["fig_stra_square", "fig_stra_square_more", "fig_intro_comparison", "fig_model_square",
                    "fig_issue_bounds", "fig_algorithms", "fig_tensorcore_square"],
               ext=["png", "pdf"]),
    log:
        "logs/report.log",
    conda:
        "../../environment.yml"
    params:
        data=lambda wc, input: os.path.dirname(input.system),
    shell:
        "strassenbench report --data {params.data:q} --resources {input.resources:q} --out report > {log:q} 2>&1"
