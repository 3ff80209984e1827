# What the main command makes: the report's inputs, every device's results and model, the comparison, and the
# main command's last words.
def schedule_targets():
    return [f"report/tables/schedule_L{lv}_S{s}.md" for lv in (1, 2) for s in config["streams"]]


def report_inputs():
    data = f"data/{DEVICE}"
    inputs = {
        "sweeps": [f"{data}/{s}.csv" for s in SWEEP_NAMES],
        "memlimit": f"{data}/memlimit.csv",
        "verify": f"{data}/verify.csv",
        "verify_impls": f"{data}/verify_impls.csv",
        "system": f"{data}/system.json",
        "resources": "build/resources.csv",
    }
    if BACKEND == "cuda":
        inputs["strategies"] = f"{data}/strategies.csv"
        inputs["validate"] = f"{data}/model_validate.csv"
    if TENSORCORE:
        inputs["accuracy"] = f"{data}/accuracy.csv"
    return inputs


def all_outputs():
    """The report (of the first device), every device's results and model, and the comparison of the devices
    with each other and with the compare folders when there is more than one run."""
    outputs = ["report/index.html", *schedule_targets()]
    for device in DEVICES:
        data = f"data/{device}"
        outputs += [f"{data}/model_{s}.csv" for s in SWEEP_NAMES] + [f"{data}/model_crossover.csv"]
        outputs += [f"{data}/{s}.csv" for s in SWEEP_NAMES] + [f"{data}/memlimit.csv", f"{data}/system.json"]
        outputs += [f"{data}/verify.csv", f"{data}/verify_impls.csv"]
        outputs += [f"{data}/accuracy.csv"] if TENSORCORE else []
    if config["compare"] or len(DEVICES) > 1:
        outputs.append("report/compare/index.html")
    return outputs


def finish_message():
    """The main command's last words: where the report is, and on a CPU run what was run and why."""
    lines = [f"strassenbench: report in {os.path.abspath('report/index.html')}"]
    if BACKEND != "cuda":
        lines.append(f"strassenbench: CPU run ({BACKEND_REASON}): the smoke profile on the {BACKEND} engine; "
                     "no GPU number was produced")
    return "\n".join(lines)


onsuccess:
    print(finish_message(), file=sys.stderr)
