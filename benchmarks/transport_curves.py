#!/usr/bin/env python3
"""Simulated vs published point-to-point curves per transport (run by transport_curves.sh).

1. Fabric replicas: for each published osu_latency curve of benchmarks/data/transports/osu_points.csv,
   a two-node star platform with the fabric's small-message time as per-message overhead, its plateau as
   link bandwidth (protocol_efficiency 1) and the curve's transport; `dtsim comm pingpong` on it is
   compared point by point with the published one-way times (the fit as the simulator applies it).
2. Shipped platforms: `dtsim comm pingpong` at the published sizes, printed with the transport used.
Never end-to-end training tables.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fit_transports  # noqa: E402  (the fitted curves' plateaus)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data", "transports", "osu_points.csv")


def dtsim():
    return os.environ.get("DTSIM", os.path.join(ROOT, "build", "apps", "dtsim"))


def pingpong(platform, sizes):
    out = subprocess.run([dtsim(), "comm", "pingpong", "--platform", platform, "--sizes",
                          ",".join(str(int(s)) for s in sizes), "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    data = json.loads(out)
    rows = data["points"] if isinstance(data, dict) else data
    return {float(r["bytes"]): float(r["time_s"]) for r in rows}


REPLICA = """name: replica
description: "two nodes of the published fabric"
nodes: 2
node:
  cpu: xeon-gold-6148
  cpu_sockets: 1
  memory_B: 1.0e11
  nics: 1
  source: "replica of a published osu_latency setup"
  intra: {{kind: shared-memory, link_bandwidth_Bps: 1.0e12, latency_s: 0, source: "unused"}}
network:
  technology: "replica"
  transport: {transport}
  topology: star
  link_bandwidth_Bps: {bw}
  latency_s: 0
  protocol_efficiency: 1.0
  per_message_overhead_s: {t0}
  source: "{fabric}"
"""


def main():
    with open(DATA) as f:
        rows = [r for r in csv.reader(line for line in f if not line.startswith("#"))]
    curves = {}
    for r in rows:
        if r[1] == "osu_latency":
            curves.setdefault((r[0], r[2]), []).append((float(r[3]), float(r[4]) * 1e-6))
    print("## Fabric replicas: simulated vs published osu_latency one-way time")
    print(f"{'transport':<10} {'fabric':<40} {'size_B':>9} {'published_us':>13} {'simulated_us':>13} {'error_%':>8}")
    summary = []
    for (transport, fabric), pts in curves.items():
        pts.sort()
        t0 = pts[0][1]
        fitted = fit_transports.FITS.get(transport)
        if fitted is not None and fitted[0] in fabric:  # the fitted curve: the fit's plateau
            plateau = fit_transports.fit_bands([(s, t * 1e6) for s, t in pts], fitted[1])[1] * 1e6
        else:  # a check curve: its largest-size slope
            plateau = (pts[-1][0] - pts[-2][0]) / (pts[-1][1] - pts[-2][1])
        sizes = [max(s, 1) for s, _ in pts]
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as tmp:
            tmp.write(REPLICA.format(transport=transport, bw=plateau, t0=t0, fabric=fabric.replace('"', "'")))
        try:
            sim = pingpong(tmp.name, sizes)
        finally:
            os.unlink(tmp.name)
        errs = []
        for (s, t), sz in zip(pts, sizes):
            m = sim[float(sz)]
            errs.append(100 * (m - t) / t)
            print(f"{transport:<10} {fabric[:40]:<40} {s:9.0f} {t * 1e6:13.2f} {m * 1e6:13.2f} {errs[-1]:+8.1f}")
        summary.append((transport, fabric, sum(map(abs, errs)) / len(errs), max(map(abs, errs))))
    print("\n## Summary (fitted curves should be within the fit residuals of docs/transports.md)")
    for transport, fabric, mean, worst in summary:
        print(f"{transport:<10} {fabric[:60]:<60} mean |error| {mean:5.1f}%  worst {worst:5.1f}%")

    print("\n## Shipped platforms: simulated one-way time and bandwidth at the published sizes")
    sizes = [1, 1024, 16384, 65536, 262144, 1048576, 4194304]
    names = subprocess.run([dtsim(), "platforms", "--format", "json"], check=True, capture_output=True,
                           text=True).stdout
    for p in json.loads(names):
        name = p["name"]
        if p.get("nodes", 2) < 2:
            continue
        check = json.loads(subprocess.run([dtsim(), "platform", "check", name, "--format", "json"], check=True,
                                          capture_output=True, text=True).stdout)
        sim = pingpong(name, sizes)
        cells = "  ".join(f"{s:>7.0f}B {sim[float(s)] * 1e6:8.2f}us {s / sim[float(s)] / 1e9:5.2f}GB/s" for s in sizes)
        print(f"{name:<18} {check['transport']:<17} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
