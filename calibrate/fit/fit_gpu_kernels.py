#!/usr/bin/env python3
"""Fits dtsim's GPU kernel model to DeepBench's published training-kernel timings.

Model (docs/calibration.md, "GPU kernel model"), per GPU and precision:
    t = launch_s + max(flops / (peak * eff[class] * fill), bytes / (bandwidth * mem_eff))
    fill = out / (out + half_fill[pass])
with `out` the elements the pass writes (dst for forward and GEMM, src for backward-data, the weights
for backward-weights: the parallelism a kernel can spread over the GPU's cores), `class` the GEMM or one of three convolution families per pass (3x3 stride 1 = Winograd-eligible,
1x1, other filters), `peak` the datasheet peak of the precision (FP32, or FP16 tensor cores) and the
bytes those of src + weights + dst at the precision's element size. Fitted by coordinate descent on
the squared log error. Writes calibrate/data/gpu_kernels.json and prints cross-validation figures.
Usage: fit_gpu_kernels.py [DEEPBENCH_DIR] [DEVICES_YAML] [OUT_JSON]   (python3, standard library + PyYAML)
"""
import csv
import json
import math
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEEPBENCH = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "reference", "deepbench")
DEVICES = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "platforms", "devices.yaml")
OUT = sys.argv[3] if len(sys.argv) > 3 else os.path.join(ROOT, "calibrate", "data", "gpu_kernels.json")

# DeepBench device column -> (catalog device, architecture). V100 and T4 ran in a DGX-1 (Specs sheet).
# KNL7250 is DeepBench's one CPU (Intel's MKL timings on a Xeon Phi 7250): the same model, fitted
# against the CPU's derived peak, gives the Knights Landing nodes of CPU clusters published kernel timings.
GPUS = {
    "M40": ("tesla-m40", "maxwell"),
    "TitanX": ("titan-x-maxwell", "maxwell"),
    "P100": ("p100-pcie", "pascal"),
    "1080Ti": ("gtx-1080ti", "pascal"),
    "TitanX_Pascal": ("titan-x-pascal", "pascal"),
    "TitanXp": ("titan-xp", "pascal"),
    "V100": ("v100-sxm2-16gb", "volta"),
    "T4": ("t4", "turing"),
    "H100": ("h100-sxm5", "hopper"),   # measured here, not DeepBench: MEASURED below
    "KNL7250": ("xeon-phi-7250", "knl"),
}
# Our own timings of DeepBench's shapes, in DeepBench's CSV layout: H100 SXM5 80 GB, PyTorch 2.11, cuDNN 9.14,
# CUDA 13.0, FP32 with TF32 off and FP16 with FP32 accumulation (calibrate/fit/time_deepbench_shapes.py).
MEASURED = os.path.join(ROOT, "calibrate", "data", "measured")
CONV_FILES = [os.path.join(DEEPBENCH, "conv.csv"), os.path.join(MEASURED, "h100_deepbench_conv.csv")]
GEMM_FILES = [os.path.join(DEEPBENCH, "gemm.csv"), os.path.join(MEASURED, "h100_deepbench_gemm.csv")]
# Precision sheets used: DeepBench label -> dtsim precision. P100's "pseudo FP16" computes in FP32 and is
# not what frameworks run, so it is left out.
PRECISIONS = {"fp32": "fp32", "fp16_mixed": "fp16-mixed"}
BYTES_PER_ELEMENT = {"fp32": 4, "fp16-mixed": 2}
# Catalog GPUs without DeepBench timings -> the DeepBench GPUs whose fit they use (geometric mean of the
# parameters when several). Rule: the same architecture where DeepBench has it; Kepler (K80) -> Maxwell
# Tesla M40, the next architecture and the same datacenter line; Ampere/Hopper (A100, H100) -> V100, the
# newest datacenter training GPU DeepBench measured (T4 is a 70 W inference part that cannot hold its
# clocks under load); H100 PCIe -> H100 SXM5, measured on a lent GPU (MEASURED). Efficiencies are fractions of the target's own peaks, so the target's roofline
# scales them; a target that states `sgemm_efficiency` (Kepler) has its compute efficiencies scaled by
# sgemm_efficiency / the source's GEMM efficiency (docs/calibration.md).
FALLBACK = {
    "k80-gk210": ["M40"],
    "p100-sxm2": ["P100"],
    "v100-sxm2-32gb": ["V100"],
    "v100-pcie-16gb": ["V100"],
    "a100-sxm4-40gb": ["V100"],
    "a100-sxm4-80gb": ["V100"],
    # H100: its own FP32 fit (measured); FP16 stays on V100 because the measured NCHW FP16 timings do not
    # follow the model (fit error ~49%, docs/calibration.md). A dict gives the sources per precision.
    "h100-sxm5": {"fp16-mixed": ["V100"]},
    "h100-pcie": {"fp32": ["H100"], "fp16-mixed": ["V100"]},
    # H200: the H100's GH100 chip with HBM3e; the H100's sources at the H200's own peaks and bandwidth.
    "h200-sxm": {"fp32": ["H100"], "fp16-mixed": ["V100"]},
}
# Leave-one-GPU-out: architectures in the order searched when the held-out GPU's own has no other GPU.
ARCH_NEIGHBOURS = {"maxwell": ["pascal"], "pascal": ["maxwell", "volta"], "volta": ["pascal", "turing"],
                   "turing": ["volta", "pascal"], "hopper": ["volta"], "knl": []}

CONV_PASSES = [("fwd", "fwd_ms"), ("bwd_data", "bwd_input_ms"), ("bwd_weights", "bwd_weights_ms")]
CLASSES = ["gemm"] + [f"conv_{p}/{f}" for p, _ in CONV_PASSES for f in ("w3", "k1", "other")]
MIN_EFF, MAX_EFF = 1e-3, 4.0   # efficiency vs the direct-convolution FLOPs: Winograd/FFT can exceed 1
MIN_LAUNCH_S, MAX_LAUNCH_S = 1e-7, 1e-3
MIN_HALF_FILL, MAX_HALF_FILL = 1.0, 1e7   # elements written at which a kernel reaches half its efficiency


def conv_family(r, s, stride_w, stride_h):
    """w3: 3x3 stride 1 (cuDNN's Winograd kernels apply); k1: 1x1 (a plain GEMM); other."""
    if r == 3 and s == 3 and stride_w == 1 and stride_h == 1:
        return "w3"
    if r == 1 and s == 1:
        return "k1"
    return "other"


def load_samples():
    """{(gpu, precision): [(class, shape_key, flops, elements, out_elements, time_s)]} from the CSVs."""
    out = {}
    for path in CONV_FILES:
        with open(path) as f:
            for row in csv.DictReader(f):
                if row["gpu"] not in GPUS or row["precision"] not in PRECISIONS:
                    continue
                v = {k: int(row[k]) for k in ("W", "H", "C", "N", "K", "R", "S", "pad_w", "pad_h", "stride_w", "stride_h")}
                p = (v["H"] + 2 * v["pad_h"] - v["R"]) // v["stride_h"] + 1
                q = (v["W"] + 2 * v["pad_w"] - v["S"]) // v["stride_w"] + 1
                flops = 2.0 * v["N"] * v["K"] * v["C"] * v["R"] * v["S"] * p * q
                src, wei, dst = v["N"] * v["C"] * v["H"] * v["W"], v["K"] * v["C"] * v["R"] * v["S"], v["N"] * v["K"] * p * q
                elements = src + wei + dst
                out_of = {"fwd": dst, "bwd_data": src, "bwd_weights": wei}
                fam = conv_family(v["R"], v["S"], v["stride_w"], v["stride_h"])
                key = "conv:" + ",".join(str(v[k]) for k in ("W", "H", "C", "N", "K", "R", "S", "stride_w"))
                for pas, col in CONV_PASSES:
                    try:
                        t = float(row[col]) * 1e-3
                    except ValueError:
                        continue  # N/A*: DeepBench skips bwd-data of input layers
                    if t > 0:
                        out.setdefault((row["gpu"], PRECISIONS[row["precision"]]), []).append(
                            (f"conv_{pas}/{fam}", key, flops, elements, out_of[pas], t))
    for path in GEMM_FILES:
        with open(path) as f:
            for row in csv.DictReader(f):
                if row["gpu"] not in GPUS or row["precision"] not in PRECISIONS:
                    continue
                m, n, k = int(row["M"]), int(row["N"]), int(row["K"])
                t = float(row["time_ms"]) * 1e-3
                key = f"gemm:{m},{n},{k},{row['a_transpose']}{row['b_transpose']}"
                if t > 0:
                    out.setdefault((row["gpu"], PRECISIONS[row["precision"]]), []).append(
                        ("gemm", key, 2.0 * m * n * k, m * k + k * n + m * n, m * n, t))
    return out


def roofs(device, precision):
    """(compute peak FLOP/s, bandwidth B/s) of a catalog device at a precision; None without tensor cores.
    A CPU's FP32 peak is derived as dtsim derives it (platforms/device.hpp, formula_peak_flops)."""
    def figure(v):  # PyYAML reads "1.4e9" (no sign in the exponent) as a string
        return float(v["value"] if isinstance(v, dict) else v)
    if precision != "fp32":
        peak = device.get("fp16_tensor_flops")
    elif device["kind"] == "cpu":
        peak = (figure(device["cores"]) * figure(device["clock_hz"]) * figure(device["simd_width_fp32"])
                * figure(device["fma_units"]) * 2)
    else:
        peak = device["peak_flops"]
    return (figure(peak), figure(device["mem_bandwidth_Bps"])) if peak else None


def pass_of(cls):
    return cls.split("/")[0]


def predict(params, peak, bw, bpe, cls, flops, elements, out):
    eff = params["eff"].get(cls, params["eff_default"])
    half = params["half_fill"].get(pass_of(cls), 0.0)
    fill = out / (out + half)
    return params["launch_s"] + max(flops / (peak * eff * fill), elements * bpe / (bw * params["mem_eff"]))


def loss(params, samples, peak, bw, bpe):
    return sum((math.log(predict(params, peak, bw, bpe, c, fl, el, o)) - math.log(t)) ** 2
               for c, _, fl, el, o, t in samples)


def golden(f, lo, hi, iters=40):
    """Minimum of f on [lo, hi] in log space (golden section)."""
    a, b = math.log(lo), math.log(hi)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(math.exp(c)), f(math.exp(d))
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(math.exp(c))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(math.exp(d))
    return math.exp((a + b) / 2)


def fit(samples, peak, bw, bpe, sweeps=6):
    """Parameters minimising the squared log error of `samples`; classes absent from them get the median."""
    params = {"launch_s": 1e-5, "mem_eff": 0.7, "eff": {c: 0.7 for c in {s[0] for s in samples}}, "eff_default": 0.7,
              "half_fill": {pass_of(s[0]): 1e4 for s in samples}}
    for _ in range(sweeps):
        def set_launch(x):
            params["launch_s"] = x
            return loss(params, samples, peak, bw, bpe)
        params["launch_s"] = golden(set_launch, MIN_LAUNCH_S, MAX_LAUNCH_S)

        def set_mem(x):
            params["mem_eff"] = x
            return loss(params, samples, peak, bw, bpe)
        params["mem_eff"] = golden(set_mem, 0.05, 1.0)
        for ps in sorted(params["half_fill"]):
            sub = [s for s in samples if pass_of(s[0]) == ps]

            def set_half(x, ps=ps, sub=sub):
                params["half_fill"][ps] = x
                return loss(params, sub, peak, bw, bpe)
            params["half_fill"][ps] = golden(set_half, MIN_HALF_FILL, MAX_HALF_FILL)
        for cls in sorted(params["eff"]):
            sub = [s for s in samples if s[0] == cls]

            def set_eff(x, cls=cls, sub=sub):
                params["eff"][cls] = x
                return loss(params, sub, peak, bw, bpe)
            params["eff"][cls] = golden(set_eff, MIN_EFF, MAX_EFF)
    effs = sorted(params["eff"].values())
    params["eff_default"] = effs[len(effs) // 2]
    return params


def geo_mean_params(plist):
    def gm(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))
    classes = set().union(*(p["eff"].keys() for p in plist))
    passes = set().union(*(p["half_fill"].keys() for p in plist))
    return {"half_fill": {c: gm([p["half_fill"][c] for p in plist if c in p["half_fill"]]) for c in passes},
            "launch_s": gm([p["launch_s"] for p in plist]), "mem_eff": gm([p["mem_eff"] for p in plist]),
            "eff": {c: gm([p["eff"].get(c, p["eff_default"]) for p in plist]) for c in classes},
            "eff_default": gm([p["eff_default"] for p in plist])}


def errors(params, samples, peak, bw, bpe):
    return [abs(predict(params, peak, bw, bpe, c, fl, el, o) / t - 1) * 100 for c, _, fl, el, o, t in samples]


def summary(errs):
    errs = sorted(errs)
    return {"mean_abs_pct": round(sum(errs) / len(errs), 1), "median_abs_pct": round(errs[len(errs) // 2], 1),
            "n": len(errs)}


# The model dtsim used before this fit, for comparison (device_model.cpp constants of that time):
# conv 0.75, GEMM 0.85 of FP32 peak, 75% of bandwidth, 10 us per op.
def old_model_errors(samples, peak, bw):
    out = []
    for c, _, fl, el, _, t in samples:
        e = 0.85 if c == "gemm" else 0.75
        pred = 1e-5 + max(fl / (peak * e), el * 4 / (bw * 0.75))
        out.append(abs(pred / t - 1) * 100)
    return out


# ---------------------------------------------------------------------------------------------------------
# Tensor kernels (transformer GEMMs, flash attention, memory-bound ops): docs/calibration.md §4d.
# GEMM:      t = launch_s + max(F / (peak[prec] * eff[pass] * fill), B / (BW * mem_eff)),
#            fill = MN / (MN + half_fill) * K / (K + half_k), F = 2MNK, B = (MK + KN + MN) * bytes[prec]
# attention: t = launch_s + F / (peak[prec] * eff[pass/mask] * d / (d + half_d) * rows / (rows + half_rows)),
#            F = 4 b h s^2 d (half when causal; x2.5 backward), rows = b h s (query rows)
# memory:    t = launch_s + bytes / (BW * eff[op/pass])
# Sources: our timings on lent GPUs (calibrate/data/measured/*_transformer_*.csv, *_deepbench_gemm.csv)
# and DeepBench's published GEMMs (V100: fp16_mixed, fp32).
TENSOR_MEASURED = {  # catalog device -> file prefix in calibrate/data/measured
    "h200-sxm": "h200",
    "h100-sxm5": "h100",
}
# DeepBench-layout GEMM sheets per catalog device: (path, gpu column) -> precision map
TENSOR_DEEPBENCH = {
    "h200-sxm": [(os.path.join(MEASURED, "h200_deepbench_gemm.csv"), "H200")],
    "h100-sxm5": [(os.path.join(MEASURED, "h100_deepbench_gemm.csv"), "H100")],
    "v100-sxm2-16gb": [(os.path.join(DEEPBENCH, "gemm.csv"), "V100")],
}
TENSOR_PRECISION_OF_DEEPBENCH = {"fp32": "fp32", "fp16_mixed": "fp16"}
TENSOR_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
TENSOR_PEAK_FIELD = {"fp32": "peak_flops", "tf32": "tf32_tensor_flops", "fp16": "fp16_tensor_flops",
                     "bf16": "bf16_tensor_flops", "fp8": "fp8_tensor_flops"}
PASS_OF_LAYOUT = {("N", "T"): "fwd", ("N", "N"): "bwd_data", ("T", "N"): "bwd_weights", ("T", "T"): "bwd_weights"}
# Catalog GPUs without tensor-kernel timings -> the fitted device whose coefficients they use (fractions of
# the target's own peaks and bandwidth). Ampere A100 <- H100: the newest cuBLAS / flash-attention kernels
# and the nearest architecture with timings of every precision; the V100 GEMMs of DeepBench predicted from
# the H100 fit are the cross-architecture check (cross_validation.cross_architecture).
TENSOR_FALLBACK = {
    "h100-pcie": {"gemm": "h100-sxm5", "attention": "h100-sxm5", "memory": "h100-sxm5"},
    "a100-sxm4-40gb": {"gemm": "h100-sxm5", "attention": "h100-sxm5", "memory": "h100-sxm5"},
    "a100-sxm4-80gb": {"gemm": "h100-sxm5", "attention": "h100-sxm5", "memory": "h100-sxm5"},
    # V100: DeepBench's GEMMs; its memory-bound ops as a fraction of its bandwidth from the H100; no
    # attention (PyTorch's flash attention needs Ampere or later).
    "v100-sxm2-16gb": {"memory": "h100-sxm5"},
    "v100-sxm2-32gb": {"gemm": "v100-sxm2-16gb", "memory": "h100-sxm5"},
    "v100-pcie-16gb": {"gemm": "v100-sxm2-16gb", "memory": "h100-sxm5"},
}
TENSOR_SOURCE = {"h200-sxm": "timed on a lent H200 (calibrate/data/measured/h200_*)",
                 "h100-sxm5": "timed on a lent H100 (calibrate/data/measured/h100_*)",
                 "v100-sxm2-16gb": "DeepBench's published V100 GEMMs"}


def figure(v):
    return float(v["value"] if isinstance(v, dict) else v)


def tensor_peak(device, prec):
    v = device.get(TENSOR_PEAK_FIELD[prec])
    return figure(v) if v else None


# A timed row whose median exceeds its fastest repeat by more than this was disturbed (host gaps inside the
# timed calls, or another process): its repeats disagree, so the fit leaves it out (3 of ~10,000 H100 rows).
MAX_MEDIAN_OVER_MIN = 1.5
DISTURBED = []


def steady(r):
    """False (and recorded) for a row of our timings whose repeats disagree (MAX_MEDIAN_OVER_MIN)."""
    if "min_ms" in r and float(r["min_ms"]) > 0 and float(r["time_ms"]) / float(r["min_ms"]) > MAX_MEDIAN_OVER_MIN:
        DISTURBED.append(r)
        return False
    return True


def load_tensor_gemms(dev):
    """{precision: [(pass, shape key, M, N, K, t)]} of one catalog device."""
    out = {}
    if dev in TENSOR_MEASURED:
        with open(os.path.join(MEASURED, f"{TENSOR_MEASURED[dev]}_transformer_gemm.csv")) as f:
            for r in csv.DictReader(f):
                if not steady(r):
                    continue
                m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
                out.setdefault(r["precision"], []).append(
                    (r["pass"], f"{m},{n},{k},{r['a_transpose']}{r['b_transpose']}", m, n, k, float(r["time_ms"]) * 1e-3))
    for path, gpu in TENSOR_DEEPBENCH.get(dev, []):
        with open(path) as f:
            for r in csv.DictReader(f):
                if r["gpu"] != gpu or r["precision"] not in TENSOR_PRECISION_OF_DEEPBENCH or not steady(r):
                    continue
                m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
                t = float(r["time_ms"]) * 1e-3
                if t > 0:
                    out.setdefault(TENSOR_PRECISION_OF_DEEPBENCH[r["precision"]], []).append(
                        (PASS_OF_LAYOUT[(r["a_transpose"], r["b_transpose"])],
                         f"db:{m},{n},{k},{r['a_transpose']}{r['b_transpose']}", m, n, k, t))
    return out


def predict_gemm(p, peak, bw, bpe, s):
    cls, _, m, n, k, _ = s
    fill = m * n / (m * n + p["half_fill"]) * k / (k + p["half_k"])
    return p["launch_s"] + max(2.0 * m * n * k / (peak * p["eff"].get(cls, p["eff_default"]) * fill),
                               (m * k + k * n + m * n) * bpe / (bw * p["mem_eff"]))


def attention_flops(pas, causal, b, h, s, d):
    f = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
    return f * (2.5 if pas == "bwd" else 1.0)


def predict_attention(p, peak, s):
    cls, _, b, h, seq, d, flops, _ = s
    rows = b * h * seq
    return p["launch_s"] + flops / (peak * p["eff"].get(cls, p["eff_default"]) * d / (d + p["half_d"])
                                    * rows / (rows + p["half_rows"]))


def predict_memory(p, bw, s):
    cls, _, nbytes, _ = s
    return p["launch_s"] + nbytes / (bw * p["eff"].get(cls, p["eff_default"]))


def coordinate_fit(params, scalars, samples, predict, sweeps):
    """Squared-log-error fit: `scalars` [(name, lo, hi)] over all samples, then eff[class] over its own."""
    def lossf(sub):
        return sum((math.log(predict(params, s)) - math.log(s[-1])) ** 2 for s in sub)
    for _ in range(sweeps):
        for name, lo, hi in scalars:
            def set_scalar(x, name=name):
                params[name] = x
                return lossf(samples)
            params[name] = golden(set_scalar, lo, hi, iters=30)
        for cls in sorted(params["eff"]):
            sub = [s for s in samples if s[0] == cls]

            def set_eff(x, cls=cls, sub=sub):
                params["eff"][cls] = x
                return lossf(sub)
            params["eff"][cls] = golden(set_eff, MIN_EFF, 2.0, iters=30)
    effs = sorted(params["eff"].values())
    params["eff_default"] = effs[len(effs) // 2]
    return params


def fit_gemm(samples, peak, bw, bpe, sweeps=4):
    p = {"launch_s": 5e-6, "mem_eff": 0.8, "half_fill": 1e5, "half_k": 100.0, "eff_default": 0.7,
         "eff": {c: 0.7 for c in {s[0] for s in samples}}}
    return coordinate_fit(p, [("launch_s", MIN_LAUNCH_S, 1e-4), ("mem_eff", 0.05, 1.2), ("half_fill", 1.0, 1e8),
                              ("half_k", 1.0, 1e5)], samples, lambda q, s: predict_gemm(q, peak, bw, bpe, s), sweeps)


def fit_attention(samples, peak, sweeps=4):
    p = {"launch_s": 5e-6, "half_d": 30.0, "half_rows": 1e4, "eff_default": 0.5,
         "eff": {c: 0.5 for c in {s[0] for s in samples}}}
    return coordinate_fit(p, [("launch_s", MIN_LAUNCH_S, 1e-4), ("half_d", 1e-3, 1e4), ("half_rows", 1.0, 1e8)],
                          samples, lambda q, s: predict_attention(q, peak, s), sweeps)


def fit_memory(samples, bw, sweeps=4):
    p = {"launch_s": 5e-6, "eff_default": 0.7, "eff": {c: 0.7 for c in {s[0] for s in samples}}}
    return coordinate_fit(p, [("launch_s", MIN_LAUNCH_S, 1e-4)], samples, lambda q, s: predict_memory(q, bw, s), sweeps)


def pct_errors(predict, p, samples):
    return [abs(predict(p, s) / s[-1] - 1) * 100 for s in samples]


def held_out(fitter, predict, samples):
    """5 folds over distinct shapes (a shape's passes stay together): errors of the held-out shapes."""
    keys = sorted({s[1] for s in samples})
    fold_of = {k: i % 5 for i, k in enumerate(keys)}
    errs = []
    for fold in range(5):
        train = [s for s in samples if fold_of[s[1]] != fold]
        test = [s for s in samples if fold_of[s[1]] == fold]
        errs += pct_errors(predict, fitter(train), test)
    return errs


def rounded_tensor(p):
    out = {k: float(f"{v:.4g}") for k, v in p.items() if k not in ("eff",)}
    out["eff"] = {c: round(v, 4) for c, v in sorted(p["eff"].items())}
    return out


def fit_tensor(catalog):
    """The "tensor" block of gpu_kernels.json, with its cross-validation."""
    devices, cv, fits = {}, {"shapes_held_out": {}, "leave_one_gpu_out": {}, "cross_architecture": {}}, {}
    gemm_data = {}
    for dev in sorted(set(TENSOR_MEASURED) | set(TENSOR_DEEPBENCH)):
        d = catalog[dev]
        bw = figure(d["mem_bandwidth_Bps"])
        entry = {"gemm": {}}
        gemm_data[dev] = load_tensor_gemms(dev)
        for prec, samples in sorted(gemm_data[dev].items()):
            peak, bpe = tensor_peak(d, prec), TENSOR_BYTES[prec]
            p = fit_gemm(samples, peak, bw, bpe)
            fits[(dev, "gemm", prec)] = p
            entry["gemm"][prec] = rounded_tensor(p)
            pred = lambda q, s, peak=peak, bw=bw, bpe=bpe: predict_gemm(q, peak, bw, bpe, s)  # noqa: E731
            cv["shapes_held_out"][f"{dev}/gemm/{prec}"] = {
                "fit": summary(pct_errors(pred, p, samples)),
                "held_out": summary(held_out(lambda tr, peak=peak, bw=bw, bpe=bpe: fit_gemm(tr, peak, bw, bpe, 3),
                                             pred, samples))}
            print(f"tensor {dev:15} gemm {prec:5} n={len(samples):4}  fit {cv['shapes_held_out'][f'{dev}/gemm/{prec}']['fit']['mean_abs_pct']:5.1f}%"
                  f"  shapes held out {cv['shapes_held_out'][f'{dev}/gemm/{prec}']['held_out']['mean_abs_pct']:5.1f}%", flush=True)
        if dev in TENSOR_MEASURED:
            prefix = os.path.join(MEASURED, TENSOR_MEASURED[dev])
            att = {}
            with open(f"{prefix}_transformer_attention.csv") as f:
                for r in csv.DictReader(f):
                    if not steady(r):
                        continue
                    b, h, seq, hd, causal = (int(r[k]) for k in ("batch", "heads", "seq", "head_dim", "causal"))
                    mask = "causal" if causal else "full"
                    att.setdefault(r["precision"], []).append(
                        (f"{r['pass']}/{mask}", f"{b},{h},{r['kv_heads']},{seq},{hd},{mask}", b, h, seq, hd,
                         attention_flops(r["pass"], causal, b, h, seq, hd), float(r["time_ms"]) * 1e-3))
            entry["attention"] = {}
            for prec, samples in sorted(att.items()):
                peak = tensor_peak(d, prec)
                p = fit_attention(samples, peak)
                fits[(dev, "attention", prec)] = p
                entry["attention"][prec] = rounded_tensor(p)
                pred = lambda q, s, peak=peak: predict_attention(q, peak, s)  # noqa: E731
                key = f"{dev}/attention/{prec}"
                cv["shapes_held_out"][key] = {"fit": summary(pct_errors(pred, p, samples)),
                                              "held_out": summary(held_out(lambda tr, peak=peak: fit_attention(tr, peak, 3), pred, samples))}
                print(f"tensor {dev:15} attention {prec:5} n={len(samples):4}  fit {cv['shapes_held_out'][key]['fit']['mean_abs_pct']:5.1f}%"
                      f"  shapes held out {cv['shapes_held_out'][key]['held_out']['mean_abs_pct']:5.1f}%", flush=True)
            mem = []
            with open(f"{prefix}_transformer_memops.csv") as f:
                for r in csv.DictReader(f):
                    if not steady(r):
                        continue
                    mem.append((f"{r['op']}/{r['pass']}", f"{r['op']},{r['rows']},{r['cols']}", float(r["bytes"]),
                                float(r["time_ms"]) * 1e-3))
            p = fit_memory(mem, bw)
            fits[(dev, "memory", "bf16")] = p
            entry["memory"] = rounded_tensor(p)
            pred = lambda q, s, bw=bw: predict_memory(q, bw, s)  # noqa: E731
            key = f"{dev}/memory"
            cv["shapes_held_out"][key] = {"fit": summary(pct_errors(pred, p, mem)),
                                          "held_out": summary(held_out(lambda tr, bw=bw: fit_memory(tr, bw, 3), pred, mem))}
            print(f"tensor {dev:15} memory     n={len(mem):4}  fit {cv['shapes_held_out'][key]['fit']['mean_abs_pct']:5.1f}%"
                  f"  shapes held out {cv['shapes_held_out'][key]['held_out']['mean_abs_pct']:5.1f}%", flush=True)
        entry["source"] = TENSOR_SOURCE[dev]
        devices[dev] = entry
    # Leave one GPU out: each of H100 / H200 predicted from the other's fit, at its own peaks and bandwidth.
    for dev, other in (("h100-sxm5", "h200-sxm"), ("h200-sxm", "h100-sxm5")):
        d = catalog[dev]
        bw = figure(d["mem_bandwidth_Bps"])
        for prec, samples in sorted(gemm_data[dev].items()):
            if (other, "gemm", prec) in fits:
                peak, bpe = tensor_peak(d, prec), TENSOR_BYTES[prec]
                e = summary(pct_errors(lambda q, s: predict_gemm(q, peak, bw, bpe, s), fits[(other, "gemm", prec)], samples))
                cv["leave_one_gpu_out"][f"{dev}/gemm/{prec}"] = dict(e, from_=other)
    # Cross-architecture: V100 (DeepBench) from the H100 fit, and H100 from the V100 fit.
    for dev, other in (("v100-sxm2-16gb", "h100-sxm5"), ("h100-sxm5", "v100-sxm2-16gb")):
        d = catalog[dev]
        bw = figure(d["mem_bandwidth_Bps"])
        for prec, samples in sorted(gemm_data[dev].items()):
            if (other, "gemm", prec) in fits:
                peak, bpe = tensor_peak(d, prec), TENSOR_BYTES[prec]
                e = summary(pct_errors(lambda q, s: predict_gemm(q, peak, bw, bpe, s), fits[(other, "gemm", prec)], samples))
                cv["cross_architecture"][f"{dev}/gemm/{prec}"] = dict(e, from_=other)
    for r in DISTURBED:
        print(f"tensor: left out a disturbed row (median {r['time_ms']} ms, min {r['min_ms']} ms): "
              + ",".join(v for k, v in r.items() if k not in ("time_ms", "min_ms", "max_ms")))
    cv["left_out_disturbed_rows"] = len(DISTURBED)
    for kind in ("leave_one_gpu_out", "cross_architecture"):
        for k, v in cv[kind].items():
            print(f"tensor {kind:18} {k:28} from {v['from_']:15} mean {v['mean_abs_pct']:5.1f}% (median {v['median_abs_pct']:4.1f}%) n={v['n']}")
    return {"about": "tensor kernels (docs/calibration.md §4d): GEMM t = launch_s + max(F / (peak * eff[pass] * fill), "
                     "B / (BW * mem_eff)), fill = MN/(MN+half_fill) * K/(K+half_k); attention t = launch_s + F / (peak * "
                     "eff[pass/mask] * d/(d+half_d) * rows/(rows+half_rows)); memory t = launch_s + bytes / (BW * eff[op/pass])",
            "devices": devices, "fallback": dict(sorted(TENSOR_FALLBACK.items())), "cross_validation": cv}


def main():
    catalog = {d["name"]: d for d in yaml.safe_load(open(DEVICES))["devices"]}
    data = load_samples()
    fits, cv_logo, cv_shapes, old = {}, {}, {}, {}
    for (gpu, prec), samples in sorted(data.items()):
        r = roofs(catalog[GPUS[gpu][0]], prec)
        if r is None:
            continue
        bpe = BYTES_PER_ELEMENT[prec]
        p = fit(samples, *r, bpe)
        fits.setdefault(gpu, {})[prec] = p
        fit_err = summary(errors(p, samples, *r, bpe))
        # Leave shapes out: 5 folds over distinct shapes (every pass of a shape goes to the same fold).
        keys = sorted({s[1] for s in samples})
        fold_of = {k: i % 5 for i, k in enumerate(keys)}
        held = []
        for fold in range(5):
            train = [s for s in samples if fold_of[s[1]] != fold]
            test = [s for s in samples if fold_of[s[1]] == fold]
            held += errors(fit(train, *r, bpe, sweeps=4), test, *r, bpe)
        cv_shapes[f"{gpu}/{prec}"] = {"fit": fit_err, "shapes_held_out": summary(held)}
        if prec == "fp32":
            old[gpu] = summary(old_model_errors(samples, *r))
        print(f"{gpu:14} {prec:10} n={len(samples):3}  fit error {fit_err['mean_abs_pct']:5.1f}% (median "
              f"{fit_err['median_abs_pct']:4.1f}%)  shapes held out {cv_shapes[f'{gpu}/{prec}']['shapes_held_out']['mean_abs_pct']:5.1f}%",
              flush=True)
    # Leave one GPU out: predict each GPU from the fits of its architecture's other GPUs, else of the
    # nearest architecture (ARCH_NEIGHBOURS), each scaled by the held-out GPU's own roofline.
    for (gpu, prec), samples in sorted(data.items()):
        if prec not in fits.get(gpu, {}):
            continue
        arch = GPUS[gpu][1]
        sources = [g for g in fits if g != gpu and GPUS[g][1] == arch and prec in fits[g]]
        for nb in ARCH_NEIGHBOURS[arch]:
            if sources:
                break
            sources = [g for g in fits if GPUS[g][1] == nb and prec in fits[g]]
        if not sources:
            continue
        r = roofs(catalog[GPUS[gpu][0]], prec)
        p = geo_mean_params([fits[g][prec] for g in sources])
        cv_logo[f"{gpu}/{prec}"] = dict(summary(errors(p, samples, *r, BYTES_PER_ELEMENT[prec])), from_=sources)
        print(f"leave {gpu:14} {prec:10} out: predicted from {'+'.join(sources):24} mean error "
              f"{cv_logo[f'{gpu}/{prec}']['mean_abs_pct']:5.1f}% (median {cv_logo[f'{gpu}/{prec}']['median_abs_pct']:4.1f}%)"
              + (f"   old roofline model {old[gpu]['mean_abs_pct']:5.1f}%" if prec == "fp32" else ""))

    def rounded(p):
        return {"launch_s": float(f"{p['launch_s']:.4g}"), "mem_eff": round(p["mem_eff"], 4),
                "eff_default": round(p["eff_default"], 4),
                "half_fill": {c: float(f"{v:.4g}") for c, v in sorted(p["half_fill"].items())}, "eff": {c: round(v, 4) for c, v in sorted(p["eff"].items())}}

    out = {
        "about": "GPU kernel model fitted to DeepBench training kernels by calibrate/fit/fit_gpu_kernels.py; "
                 "t = launch_s + max(flops / (peak * eff[class]), bytes / (bandwidth * mem_eff)); docs/calibration.md",
        "source": "Baidu DeepBench results/train (commit da81ba78), ../shared/reference/deepbench; peaks from platforms/devices.yaml",
        "classes": "gemm; conv_<pass>/<family>, family w3 = 3x3 stride 1, k1 = 1x1, other",
        "devices": {GPUS[g][0]: {"deepbench": g, "architecture": GPUS[g][1],
                                 "precisions": {pr: rounded(p) for pr, p in sorted(fits[g].items())}}
                    for g in sorted(fits)},
        "fallback": {},
        "cross_validation": {"leave_one_gpu_out": cv_logo, "shapes_held_out": cv_shapes,
                             "old_roofline_model_fp32": old},
        "tensor": fit_tensor(catalog),
    }
    for target, srcs in FALLBACK.items():
        by_prec = srcs if isinstance(srcs, dict) else {pr: srcs for pr in PRECISIONS.values()}
        precs, used = {}, []
        for pr, gs in by_prec.items():
            plist = [fits[g][pr] for g in gs if pr in fits.get(g, {})]
            if plist:
                precs[pr] = rounded(geo_mean_params(plist))
                if isinstance(srcs, dict):  # sources differ per precision: name them in the block
                    precs[pr]["from"] = [GPUS[g][0] for g in gs]
                used += [GPUS[g][0] for g in gs if GPUS[g][0] not in used]
        out["fallback"][target] = {"from": used, "precisions": precs}
        if target in out["devices"]:  # a precision that falls back is not also shipped from the own fit
            for pr in precs:
                out["devices"][target]["precisions"].pop(pr, None)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
