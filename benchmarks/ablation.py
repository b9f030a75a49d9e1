"""Ablation of the scale-fidelity mechanisms (issue 14 item 8) over every open accuracy table.

Each table is predicted under ideal -> +transport -> +collective library -> +framework -> +variance and
the MAPE of each step is printed, so the contribution of each mechanism is visible:
  ideal       the shipped platform with both transports set to `ideal` (no size bands, no TCP cap, no
              host staging), collective library `none`, framework `none`, --no-variability;
  +transport  the shipped platform's transports (docs/transports.md);
  +collective the library the study ran (docs/collective-libraries.md), strategy allreduce-auto for
              allreduce rows; parameter-server rows have no collective and do not change;
  +framework  the study's framework profile where dtsim has one (docs/frameworks.md);
  +variance   the synchronisation variance default (persistent device spread by device class, on unless
              --no-variability: docs/simulation-training.md, Variability).
Steps before +collective pass --collective-library none, and steps before +variance --no-variability,
since both are on by default.
A step that changes no flag for a table reuses the previous step's predictions and says why.
Tables: benchmarks/data/open-measurements.yaml (what `dtsim accuracy` runs) and
benchmarks/data/tf-benchmarks-2017.yaml (benchmarks/predict_tf_benchmarks.sh). Each study is anchored at
its measured 1-GPU row, which is left out of the MAPE.
Runs ABLATION_JOBS (default 6) predictions at once; ABLATION_TABLES (a regular expression) keeps only
the matching tables.
Usage: ablation.py DTSIM OPEN_MEASUREMENTS_YAML TF_BENCHMARKS_YAML PLATFORM_DIR
"""
import concurrent.futures
import csv
import io
import os
import re
import subprocess
import sys
import tempfile

import yaml

STEPS = ["ideal", "+transport", "+collective", "+framework", "+variance"]
GPUS_PER_NODE_1080TI = 4

dtsim, open_path, tf_path, platform_dir = sys.argv[1:5]
tmp = tempfile.mkdtemp(prefix="dtsim-ablation-")


def ideal_platform(name):
    """A copy of the shipped platform with both transports set to `ideal`."""
    with open(os.path.join(platform_dir, name + ".yaml")) as f:
        doc = yaml.safe_load(f)
    doc["network"]["transport"] = "ideal"
    doc["node"].setdefault("intra", {})["transport"] = "ideal"
    path = os.path.join(tmp, name + "-ideal.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return path


def predict(model, platform, batch, strategy, workers, anchor, ps=None, data=None, library=None, variability=False,
            balance=None):
    cmd = [dtsim, "predict", "--model", model, "--platform", platform, "--batch", str(batch), "--strategy", strategy,
           "--workers", ",".join(str(w) for w in workers), "--anchor", str(anchor), "--format", "csv"]
    if ps:
        cmd += ["--ps", ",".join(str(p) for p in ps)]
    if data:
        cmd += ["--data", data]
    if library:
        cmd += ["--collective-library", library]
    if balance:
        cmd += ["--ps-balance", balance]
    if not variability:
        cmd += ["--no-variability"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {int(r["workers"]): float(r["throughput"]) for r in csv.DictReader(io.StringIO(out))}


class Group:
    """Rows predicted by one command: same model, platform, batch, strategy and data."""

    def __init__(self, table, model, platform, batch, strategy, anchor, rows, data=None, library=None, balance=None):
        self.table, self.model, self.platform, self.batch = table, model, platform, batch
        self.strategy, self.anchor, self.rows, self.data, self.library = strategy, anchor, rows, data, library
        self.balance = balance  # the framework's variable placement (MXNet ps-lite), from the +framework step

    def run(self, step):
        allreduce = self.strategy.startswith("allreduce")
        platform = ideal_platform(self.platform) if step == "ideal" else self.platform
        strategy, library = self.strategy, "none"
        if STEPS.index(step) >= STEPS.index("+collective") and allreduce and self.library:
            strategy, library = "allreduce-auto", self.library
        ps = [r[1] for r in self.rows] if self.strategy.startswith("ps") else None
        balance = self.balance if STEPS.index(step) >= STEPS.index("+framework") else None
        return predict(self.model, platform, self.batch, strategy, [r[0] for r in self.rows], self.anchor, ps,
                       self.data, library, variability=step == "+variance", balance=balance)

    def changes(self, step):
        """Why `step` leaves this group's flags as they were, or None when it changes them."""
        if step == "+transport":
            return None
        if step == "+collective":
            if not self.strategy.startswith("allreduce"):
                return "parameter servers: no collective"
            return None if self.library else "no library named"
        if step == "+framework":
            return None if self.balance else "no dtsim profile for the TensorFlow 1.x runtime"
        return None


groups = []
open_data = yaml.safe_load(open(open_path))
pd = open_data["piz_daint_inception_v3"]
for real in (False, True):
    rows = [r for r in pd["rows"] if r[3] == real]
    anchor = next(r[4] for r in rows if r[0] == 1)
    for update, strategy in (("parameter_server", "ps"), ("distributed_replicated", "ps-replicated")):
        sel = [(r[0], r[1], r[4]) for r in rows if r[2] == update]
        if sel:
            groups.append(Group(f"piz_daint_inception_v3 {'real' if real else 'synthetic'}", pd["model"], "piz-daint",
                                pd["batch_per_worker"], strategy, anchor, sel, "real" if real else "synthetic"))
gt = open_data["gtx1080ti_mxnet_resnet50"]
anchor = next(r[1] for r in gt["rows"] if r[0] == 1)
groups.append(Group("gtx1080ti_mxnet_resnet50 real", gt["model"], "gtx1080ti-cluster", gt["batch_per_worker"],
                    "ps-replicated", anchor,
                    [(r[0], (r[0] + GPUS_PER_NODE_1080TI - 1) // GPUS_PER_NODE_1080TI, r[1]) for r in gt["rows"]],
                    "real", balance="mxnet"))
tf = yaml.safe_load(open(tf_path))
for key, title in (("dgx1_p100_single_server", "tf-benchmarks DGX-1"),
                   ("aws_k80_distributed", "tf-benchmarks AWS p2.8xlarge")):
    for model, m in tf[key]["models"].items():
        rows = [(r[0], r[1], r[2]) for r in m["rows"]]
        # TensorFlow's `replicated` variable update with NCCL all-reduce inside the DGX-1.
        library = "nccl-2.7" if m["strategy"].startswith("allreduce") else None
        groups.append(Group(title, model, tf[key]["platform"], m["batch"], m["strategy"], m["anchor"], rows,
                            library=library))

# ABLATION_TABLES (a regular expression) keeps only the tables whose name matches it.
only = os.environ.get("ABLATION_TABLES")
if only:
    groups = [g for g in groups if re.search(only, g.table)]
# Every (group, step) that changes a flag runs as its own process, several at once.
jobs = int(os.environ.get("ABLATION_JOBS", "6"))
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    runs = {(i, step): pool.submit(g.run, step) for i, g in enumerate(groups) for step in STEPS
            if step == "ideal" or not g.changes(step)}
    results = {key: f.result() for key, f in runs.items()}

errors = {}  # (table, step) -> list of |error|
notes = {}
for i, g in enumerate(groups):
    previous = None
    for step in STEPS:
        why = None if step == "ideal" else g.changes(step)
        pred = previous if why else results[(i, step)]
        if why:
            notes.setdefault((g.table, step), set()).add(f"{g.model} {g.strategy}: {why}")
        previous = pred
        for workers, _, measured in g.rows:
            if workers == 1:
                continue
            errors.setdefault((g.table, step), []).append(abs(pred[workers] / measured - 1) * 100)

tables = []
for g in groups:
    if g.table not in tables:
        tables.append(g.table)
print("MAPE (%) per open table and step (anchor rows excluded)")
print(f"{'table':40} {'rows':>4} " + " ".join(f"{s:>11}" for s in STEPS))
for t in tables:
    e = [errors[(t, s)] for s in STEPS]
    print(f"{t:40} {len(e[0]):>4} " + " ".join(f"{sum(x) / len(x):11.2f}" for x in e))
alle = {s: [x for t in tables for x in errors[(t, s)]] for s in STEPS}
print(f"{'all':40} {len(alle['ideal']):>4} " + " ".join(f"{sum(alle[s]) / len(alle[s]):11.2f}" for s in STEPS))
print("\nrows whose flags a step leaves unchanged (the previous step's predictions are reused):")
for (t, s), why in notes.items():
    print(f"  {t}, {s}: {'; '.join(sorted(why))}")
