# The report: every figure (PNG and PDF) and table of the paper in report/index.html. Its numbers are read
# from the files other rules wrote: the device's results, build/resources.csv, and the model's files beside
# the results (data/<device>/model_*.csv, which `strassenbench report` finds in its --data folder).
from strassenbench.model.files import MODEL_FILES
from strassenbench.report.contents import REPORT_FIGURES


rule report:
    input:
        **report_inputs(),
        model=[f"data/{DEVICE}/{name}" for name in MODEL_FILES],
    output:
        "report/index.html",
        expand("report/figures/{fig}.{ext}", fig=REPORT_FIGURES, ext=["png", "pdf"]),
    log:
        "logs/report.log",
    conda:
        "../../environment.yml"
    params:
        data=lambda wc, input: os.path.dirname(input.system),
    shell:
        "strassenbench report --data {params.data:q} --resources {input.resources:q} --out report > {log:q} 2>&1"
