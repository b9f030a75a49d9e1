import json, re, subprocess, sys, yaml

dtsim, path = sys.argv[1:3]
# What-if only, not dtsim's model: 3x3 stride-1 convolutions run as Winograd F(2x2,3x3), which needs 2.25x
# fewer multiplications (Lavin & Gray 2016, arXiv:1509.09308), at the same efficiency.
WINOGRAD_F2X2_3X3 = 2.25


def winograd_layers(model):
    """Names of the model's 3x3 stride-1 convolutions (the shapes cuDNN's autotuner can run as Winograd)."""
    text = subprocess.run([dtsim, "model", "export", model], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in text.splitlines():
        m = re.search(r'name: "([^"]+)", op: conv2d', line)
        if not m:
            continue
        kernel = re.search(r"kernel: (\[[^\]]*\]|\d+)", line)
        stride = re.search(r"stride: (\[[^\]]*\]|\d+)", line)
        if kernel and kernel.group(1) in ("3", "[3, 3]") and (not stride or stride.group(1) in ("1", "[1, 1]")):
            names.add(m.group(1))
    return names


def predict(model, device, batch, sockets=1, gpu=True):
    """dtsim's samples/s, the what-if Winograd samples/s, the 3x3/s1 share of the step, and the coverage."""
    out = subprocess.run([dtsim, "calibrate", "report", "--model", model, "--device", device, "--batch", str(batch),
                          "--sockets", str(sockets), "--format", "json"], check=True, capture_output=True, text=True)
    j = json.loads(out.stdout)
    w3 = winograd_layers(model)
    step = sum(l["fwd_s"] + l["bwd_data_s"] + l["bwd_weights_s"] for l in j["layers"]) + j["update_s"]
    w3_s = sum(l["fwd_s"] + l["bwd_data_s"] + l["bwd_weights_s"] for l in j["layers"] if l["layer"] in w3)
    what_if = batch / (step - w3_s * (1 - 1 / WINOGRAD_F2X2_3X3)) if gpu else j["samples_per_s"]
    return j["samples_per_s"], what_if, w3_s / step, j["coverage"]


def row(label, model, device, batch, published):
    pred, what_if, share, coverage = predict(model, device, batch)
    err, err_w = (pred / published - 1) * 100, (what_if / published - 1) * 100
    print(f"{label:8} {model:13} {device:11} batch {batch:>3}  predicted {pred:7.1f}  published {published:7.1f} img/s  "
          f"error {err:+6.1f}%  3x3/s1 share {share * 100:3.0f}%  what-if Winograd {err_w:+6.1f}%  "
          f"coverage {coverage * 100:3.0f}%")
    return abs(err), abs(err_w)


print("Published single-GPU throughputs, unanchored (what-if Winograd: not dtsim's model, see docs/calibration.md):")
row("CSCS", "inception_v3", "p100-pcie", 64, 138.23)   # TF 1.1, Piz Daint P100 PCIe, synthetic
row("PRACE", "resnet50", "gtx-1080ti", 64, 182)         # MXNet, real data
errors = {}
for model, device, batch, published in yaml.safe_load(open(path))["single_gpu"]["rows"]:
    errors.setdefault(device, []).append(row("TF page", model, device, batch, published))
for device, e in errors.items():
    print(f"TF page {device}: mean absolute error {sum(a for a, _ in e) / len(e):.1f}% over {len(e)} rows "
          f"(what-if Winograd {sum(b for _, b in e) / len(e):.1f}%)")

# OSU 2019 (open-measurements.yaml, osu_cpu_study_facts): "the fastest Skylake is up to 2.35x faster than a
# K80 (Inception-v4) and up to 3.32x slower than a V100 (ResNet-101)". Skylake = Stampede2's 2x Platinum 8160
# (48 cores, one process); the study's batch is not in the reference, 64 per device is assumed.
skx_v4, _, _, _ = predict("inception_v4", "xeon-platinum-8160", 64, sockets=2, gpu=False)
k80_v4, k80_v4_w, _, _ = predict("inception_v4", "k80-gk210", 64)
skx_101, _, _, _ = predict("resnet101", "xeon-platinum-8160", 64, sockets=2, gpu=False)
v100_101, v100_101_w, _, _ = predict("resnet101", "v100-sxm2-32gb", 64)
print(f"OSU      Inception-v4 Skylake/K80  {skx_v4 / k80_v4:.2f}x (published up to 2.35x; what-if Winograd "
      f"{skx_v4 / k80_v4_w:.2f}x)  Skylake {skx_v4:.1f}, K80 {k80_v4:.1f} img/s")
print(f"OSU      ResNet-101 V100/Skylake {v100_101 / skx_101:.2f}x (published up to 3.32x; what-if Winograd "
      f"{v100_101_w / skx_101:.2f}x)  Skylake {skx_101:.1f}, V100 {v100_101:.1f} img/s")
