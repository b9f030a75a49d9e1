"""Published transformer training throughputs beside dtsim's predictions (held-out checks, nothing fitted).

Reads benchmarks/data/llm-*.yaml (row fields: benchmarks/README.md, "Transformer accuracy data"), runs
`dtsim predict` for each row and prints the published figure, dtsim's figure in the same unit and the
relative error dtsim / published - 1. Rows whose features the given dtsim cannot express (a flag missing
from `dtsim predict --help`, a precision it does not list) are skipped with the reason; a prediction
dtsim refuses (exit 2: a layout it rejects, a platform too small, a model that does not fit) is skipped
with dtsim's own one-line message.

Usage: accuracy_transformers.py [--set single|large|all] [--only REGEX] [--jobs N] [--timeout S]
                                [--check] [--dry-run] DTSIM DATA_YAML...
Exit status: 0 (also when rows are skipped), 2 for a malformed data file (one line naming file, row, field).
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys

import yaml

UNITS = {
    "tokens_per_s": "tokens/s",
    "tokens_per_s_per_gpu": "tokens/s/GPU",
    "sequences_per_s": "seq/s",
    "iteration_time_s": "s/iter",
    "tflops_per_gpu_eq3": "TFLOP/s/GPU (Eq. 3)",
    "mfu": "MFU",
}
PRECISIONS = ("fp32", "tf32", "fp16-mixed", "bf16-mixed", "fp8")
RECOMPUTE = ("none", "selective", "full")
REQUIRED = ("id", "model", "gpus", "precision", "seq_len", "global_batch", "micro_batch", "tp", "pp", "figure", "unit")
INTS = ("gpus", "seq_len", "global_batch", "micro_batch", "tp", "pp", "vp", "cp", "ep", "zero", "eq3_layers", "eq3_hidden",
        "eq3_vocab", "mlm_predictions")
OPTIONAL = ("vp", "cp", "ep", "sp", "zero", "recompute", "order", "flash_attention", "mlm_predictions", "assumed", "platform",
            "eq3_layers", "eq3_hidden", "eq3_vocab", "mfu", "tflops_per_gpu", "model_tflops_per_gpu", "iteration_time_s",
            "note")
# Layout fields, the predict flag each needs and the value dtsim takes without it.
LAYOUT_FLAGS = (("tp", "--tp", 1), ("pp", "--pp", 1), ("vp", "--vp", 1), ("cp", "--cp", 1), ("ep", "--ep", 1),
                ("zero", "--zero", 0), ("recompute", "--recompute", "none"), ("order", "--order", "tp-cp-dp-pp"))


def fail(msg):
    print(f"accuracy_transformers: {msg}", file=sys.stderr)
    sys.exit(2)


def load_rows(path, root):
    try:
        doc = yaml.safe_load(open(path))
    except (OSError, yaml.YAMLError) as e:
        fail(f"{path}: cannot read: {str(e).splitlines()[0]}")
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or "source" not in doc:
        fail(f"{path}: expected a map with 'source' and a list 'rows'")
    defaults = doc.get("defaults") or {}
    rows = []
    for i, raw in enumerate(doc["rows"], 1):
        if not isinstance(raw, dict):
            fail(f"{path}: row {i}: expected a map")
        row = {**defaults, **raw}
        if "assumed" in defaults and "assumed" in raw:
            row["assumed"] = sorted(set(defaults["assumed"]) | set(raw["assumed"]))
        where = f"{path}: row {i} ({row.get('id', '?')})"
        for key in row:
            if key not in REQUIRED and key not in OPTIONAL:
                fail(f"{where}: unknown field '{key}' (known: {', '.join(REQUIRED + OPTIONAL)})")
        for key in REQUIRED:
            if key not in row:
                fail(f"{where}: field '{key}' is missing")
        for key in INTS:
            if key in row and (not isinstance(row[key], int) or isinstance(row[key], bool) or row[key] < 0):
                fail(f"{where}: field '{key}' must be a non-negative whole number, got {row[key]!r}")
        if row["precision"] not in PRECISIONS:
            fail(f"{where}: field 'precision' must be one of {', '.join(PRECISIONS)}, got {row['precision']!r}")
        if row.get("recompute", "none") not in RECOMPUTE:
            fail(f"{where}: field 'recompute' must be one of {', '.join(RECOMPUTE)}, got {row['recompute']!r}")
        if "order" in row and sorted(str(row["order"]).split("-")) != ["cp", "dp", "pp", "tp"]:
            fail(f"{where}: field 'order' must name tp, cp, dp and pp once each joined by '-', got {row['order']!r}")
        if row["unit"] not in UNITS:
            fail(f"{where}: field 'unit' must be one of {', '.join(UNITS)}, got {row['unit']!r}")
        if not isinstance(row["figure"], (int, float)) or isinstance(row["figure"], bool) or row["figure"] <= 0:
            fail(f"{where}: field 'figure' must be a positive number, got {row['figure']!r}")
        for key in ("sp", "flash_attention"):
            if key in row and not isinstance(row[key], bool):
                fail(f"{where}: field '{key}' must be true or false, got {row[key]!r}")
        if row.get("mlm_predictions", 0) > row["seq_len"]:
            fail(f"{where}: field 'mlm_predictions' {row['mlm_predictions']} exceeds seq_len {row['seq_len']}")
        if row["unit"] == "tflops_per_gpu_eq3" and not all(k in row for k in ("eq3_layers", "eq3_hidden", "eq3_vocab")):
            fail(f"{where}: unit tflops_per_gpu_eq3 needs eq3_layers, eq3_hidden and eq3_vocab")
        model_parallel = row["tp"] * row["pp"] * row.get("cp", 1)
        if model_parallel == 0 or row["gpus"] % model_parallel:
            fail(f"{where}: tp x pp x cp = {model_parallel} does not divide gpus {row['gpus']}")
        dp = row["gpus"] // model_parallel
        if row["micro_batch"] == 0 or row["global_batch"] % (dp * row["micro_batch"]):
            fail(f"{where}: global_batch {row['global_batch']} is not a multiple of data-parallel size {dp} x "
                 f"micro_batch {row['micro_batch']}")
        row["platform"] = row.get("platform", doc.get("platform"))
        if not row["platform"]:
            fail(f"{where}: no platform (give 'platform' in the file or the row)")
        if row["model"].endswith(".json"):
            row["model_path"] = os.path.join(root, row["model"])
            if not os.path.isfile(row["model_path"]):
                fail(f"{where}: field 'model': no file {row['model']}")
        row["source"] = doc["source"]
        row["file"] = os.path.basename(path)
        rows.append(row)
    return rows


def predict_help(dtsim):
    out = subprocess.run([dtsim, "predict", "--help"], capture_output=True, text=True).stdout
    flags = set(re.findall(r"(--[a-z][a-z0-9-]*)", out))
    # The --precision entry runs to the next option line; the precisions it names are the ones dtsim has.
    m = re.search(r"^\s*--precision\b(.*?)(?=^\s*-{1,2}[a-zA-Z]|\Z)", out, re.M | re.S)
    words = set(re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)*", m.group(1))) if m else set()
    precisions = {p for p in PRECISIONS if p in words}
    return flags, precisions


def model_default_seq(dtsim, row, cache):
    """The sequence dtsim runs a model at without --seq-len (zoo input column, or the config's positions)."""
    if "model_path" in row:
        cfg = json.load(open(row["model_path"]))
        return cfg.get("n_positions") or cfg.get("max_position_embeddings")
    if "zoo" not in cache:
        out = subprocess.run([dtsim, "models"], capture_output=True, text=True).stdout
        cache["zoo"] = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+1x(\d+)x1\s", out, re.M)}
    return cache["zoo"].get(row["model"])


def layout(row):
    parts = [f"tp{row['tp']}", f"pp{row['pp']}"]
    for key in ("vp", "cp", "ep"):
        if row.get(key, 1) != 1:
            parts.append(f"{key}{row[key]}")
    if row.get("sp"):
        parts.append("sp")
    if row.get("zero", 0):
        parts.append(f"z{row['zero']}")
    if row.get("recompute", "none") != "none":
        parts.append(f"rc-{row['recompute'][:3]}")
    if row.get("order", "tp-cp-dp-pp") != "tp-cp-dp-pp":
        parts.append(row["order"])
    if row.get("flash_attention") is False:
        parts.append("dense-attn")
    if row.get("mlm_predictions", 0):
        parts.append(f"mlm{row['mlm_predictions']}")
    parts.append(f"mb{row['micro_batch']} gb{row['global_batch']} s{row['seq_len']} {row['precision']}")
    return " ".join(parts)


def command(dtsim, row, flags, precisions, seq_cache):
    """(argv, how) for the prediction, or (None, reason) when this dtsim cannot express the row."""
    model = row.get("model_path", row["model"])
    argv = [dtsim, "predict", "--model", model, "--platform", row["platform"], "--workers", str(row["gpus"]),
            "--format", "json"]
    missing = []
    no_precision = bool(precisions) and row["precision"] not in precisions
    if row["precision"] != "fp32":
        argv += ["--precision", row["precision"]]
    for key, flag, neutral in LAYOUT_FLAGS:
        value = row.get(key, neutral)
        if flag in flags:
            if key in row:
                argv += [flag, str(value)]
        elif value != neutral:
            missing.append(flag)
    if row.get("sp"):
        if "--sequence-parallel" in flags:
            argv.append("--sequence-parallel")
        else:
            missing.append("--sequence-parallel")
    if row.get("flash_attention") is False:  # the code ran dense attention kernels (dtsim's default: flash)
        if "--no-flash-attention" in flags:
            argv.append("--no-flash-attention")
        else:
            missing.append("--no-flash-attention")
    if row.get("mlm_predictions", 0):
        if "--mlm-predictions" in flags:
            argv += ["--mlm-predictions", str(row["mlm_predictions"])]
        else:
            missing.append("--mlm-predictions")
    if "--seq-len" in flags and "--global-batch" in flags and "--micro-batch" in flags:
        argv += ["--seq-len", str(row["seq_len"]), "--global-batch", str(row["global_batch"]), "--micro-batch",
                 str(row["micro_batch"])]
        how = "layout flags"
    else:
        # Without the batch flags, dtsim's --batch (samples per worker and iteration, no accumulation) says the
        # same only for plain data parallelism at the model's default sequence.
        plain = row["tp"] * row["pp"] * row.get("cp", 1) == 1 and row["global_batch"] == row["micro_batch"] * row["gpus"]
        default_seq = model_default_seq(argv[0], row, seq_cache)
        for flag in ("--seq-len", "--global-batch", "--micro-batch"):
            if flag not in flags and not (plain and default_seq == row["seq_len"]):
                missing.append(flag)
        argv += ["--batch", str(row["micro_batch"])]
        how = "--batch (plain data parallelism)"
    reasons = [f"dtsim has no {', '.join(sorted(set(missing)))} yet"] if missing else []
    if no_precision:
        reasons.append(f"its --precision has no {row['precision']} (it lists {'|'.join(sorted(precisions))})")
    if reasons:
        return None, "; ".join(reasons)
    return argv, how


def eq3_flops(row):
    """Narayanan et al. (SC'21) Eq. (3): FLOPs per iteration with full recomputation."""
    b, s, l, h, v = row["global_batch"], row["seq_len"], row["eq3_layers"], row["eq3_hidden"], row["eq3_vocab"]
    return 96.0 * b * s * l * h * h * (1 + s / (6.0 * h) + v / (16.0 * l * h))


def dtsim_figure(row, point):
    """dtsim's prediction in the row's unit, or (None, reason)."""
    unit = row["unit"]
    t = point.get("iteration_time_s")
    tokens = point.get("tokens_per_s")
    if tokens is None and t:
        tokens = row["global_batch"] * row["seq_len"] / t
    if unit == "tokens_per_s":
        return tokens, None
    if unit == "tokens_per_s_per_gpu":
        return tokens / row["gpus"], None
    if unit == "sequences_per_s":
        return tokens / row["seq_len"], None
    if unit == "iteration_time_s":
        return t, None
    if unit == "tflops_per_gpu_eq3":
        return eq3_flops(row) / (row["gpus"] * t) / 1e12, None
    if unit == "mfu":
        if "mfu" not in point:
            return None, "dtsim's output has no mfu yet"
        return point["mfu"], None
    return None, f"unit {unit}"


def run(row, argv, timeout):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"dtsim ran past {timeout} s"
    if p.returncode != 0:
        lines = [x for x in p.stderr.splitlines() if x.strip()]
        return None, f"dtsim exit {p.returncode}: {lines[-1] if lines else '(no message)'}"
    try:
        point = json.loads(p.stdout)["points"][0]
    except (ValueError, KeyError, IndexError):
        return None, "dtsim's JSON output has no points"
    if not point.get("iteration_time_s"):
        return None, "dtsim's output has no iteration_time_s"
    return point, None


def fmt(value, unit):
    if unit == "mfu":
        return f"{100 * value:.1f}%"
    if unit == "iteration_time_s":
        return f"{value:.2f}"
    if unit == "tflops_per_gpu_eq3":
        return f"{value:.1f}"
    if value >= 10000:
        return f"{value:,.0f}"
    return f"{value:,.1f}" if value >= 100 else f"{value:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dtsim")
    ap.add_argument("data", nargs="+")
    ap.add_argument("--set", choices=("single", "large", "all"), default="all",
                    help="single: rows on one node (<= 8 GPUs); large: the rest")
    ap.add_argument("--only", default="", help="regular expression on row ids")
    ap.add_argument("--jobs", type=int, default=1, help="predictions at once")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per prediction")
    ap.add_argument("--check", action="store_true", help="validate the data files only")
    ap.add_argument("--dry-run", action="store_true", help="print each row's command instead of running it")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rows = [r for path in args.data for r in load_rows(path, root)]
    ids = [r["id"] for r in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        fail(f"duplicate row ids: {', '.join(dup)}")
    if args.check:
        print(f"{len(rows)} rows in {len(args.data)} files: well formed")
        return
    rows = [r for r in rows if re.search(args.only, r["id"])]
    if args.set != "all":
        rows = [r for r in rows if (r["gpus"] <= 8) == (args.set == "single")]
    flags, precisions = predict_help(args.dtsim)
    seq_cache = {}
    plans = [(r, *command(args.dtsim, r, flags, precisions, seq_cache)) for r in rows]
    if args.dry_run:
        for row, argv, how in plans:
            print(f"{row['id']}: " + (" ".join(argv[1:]) if argv else f"skipped: {how}"))
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {row["id"]: pool.submit(run, row, argv, args.timeout) for row, argv, _ in plans if argv}
        results = {}
        for row, argv, how in plans:
            results[row["id"]] = futures[row["id"]].result() if argv else (None, how)
    errors = {"single": [], "large": []}
    skipped = {"single": 0, "large": 0}
    current = None
    for row, argv, how in plans:
        group = "single" if row["gpus"] <= 8 else "large"
        if row["file"] != current:
            current = row["file"]
            print(f"\n{row['file']}: {row['source']}")
            print(f"  {'id':<32}{'model':<16}{'GPUs':>6}  {'platform':<19}{'published':>12}{'dtsim':>12}  {'error':>7}  layout")
        point, reason = results[row["id"]]
        model = os.path.basename(row["model"]).removesuffix(".json")
        pub = fmt(row["figure"], row["unit"])
        star = "*" if row.get("assumed") else " "
        head = f"  {row['id']:<32}{model:<16}{row['gpus']:>6}  {row['platform']:<19}{pub:>12}"
        if point is not None:
            value, reason = dtsim_figure(row, point)
        if point is None or value is None:
            skipped[group] += 1
            print(f"{head}{'-':>12}  {'-':>7}  {layout(row)}{star}  skipped: {reason}")
            continue
        err = value / row["figure"] - 1
        errors[group].append(abs(err))
        note = "" if how == "layout flags" else f"  ({how})"
        print(f"{head}{fmt(value, row['unit']):>12}  {100 * err:>+6.1f}%  {layout(row)}{star}  {UNITS[row['unit']]}{note}")
    print("\n* some of the row's settings are assumed, not published (the data file's 'assumed' list).")
    print("error = dtsim / published - 1 in the published unit (for s/iter, a positive error is a slower prediction).")
    for group, title in (("single", "one node (<= 8 GPUs)"), ("large", "more than one node")):
        e = errors[group]
        mape = f"mean absolute error {100 * sum(e) / len(e):.1f}% over {len(e)} rows" if e else "no rows compared"
        print(f"{title}: {mape}, {skipped[group]} skipped")


if __name__ == "__main__":
    main()
