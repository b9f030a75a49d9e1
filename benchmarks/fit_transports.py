#!/usr/bin/env python3
"""Fits each transport's factor bands and caps from benchmarks/data/transports/osu_points.csv.

Method (docs/transports.md): per band of message sizes, a weighted least-squares line
t(s) = a + s / b through the published osu_latency one-way times (weights 1/t^2, i.e. relative
error). The band's latency factor is a / t(0) (the small-message latency the platform file already
states) and its bandwidth scale is b / b_last (the last band reaches the platform's
protocol_efficiency). TCP: Hockney (one band) and a per-connection cap from single-stream figures.
Prints the constants for platforms/src/transports/*.cpp and the residuals. Pure Python, no numpy.
"""
import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "transports", "osu_points.csv")

# Per transport: the curve fitted (a substring of its fabric column), the band boundaries (bytes), and
# the curves only checked. Boundaries sit at the protocol switches visible in the fitted curve: UCX
# rc short/bcopy near 256 B, zero-copy near 16 KB, rendezvous near 256 KB; TCP's jump at 64 KB.
FITS = {
    "rdma": ("Azure HDR", [0, 256, 16384, 262144], ["InfiniPath DDR", "InfiniPath SDR"]),
    "tcp": ("AWS EC2 Open MPI over TCP", [0, 65536], []),
}


def load():
    with open(DATA) as f:
        rows = [r for r in csv.reader(line for line in f if not line.startswith("#"))]
    return [dict(transport=r[0], bench=r[1], fabric=r[2], size=float(r[3]), value=float(r[4]), unit=r[5], src=r[6])
            for r in rows]


def line_fit(pts):
    """Weighted least squares t = a + k s (weights 1/t^2). Returns (a, 1/k)."""
    w = [1.0 / t ** 2 for _, t in pts]
    sw = sum(w)
    sx = sum(wi * s for wi, (s, _) in zip(w, pts))
    sy = sum(wi * t for wi, (_, t) in zip(w, pts))
    sxx = sum(wi * s * s for wi, (s, _) in zip(w, pts))
    sxy = sum(wi * s * t for wi, (s, t) in zip(w, pts))
    k = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
    a = (sy - k * sx) / sw
    return a, 1.0 / k


def fit_bands(curve, bounds):
    t0 = curve[0][1]
    fits = []
    for i, lo in enumerate(bounds):
        hi = bounds[i + 1] if i + 1 < len(bounds) else float("inf")
        pts = [(s, t) for s, t in curve if lo <= s < hi]
        fits.append((lo,) + line_fit(pts))
    b_last = fits[-1][2]
    return t0, b_last, [(lo, a / t0, b / b_last) for lo, a, b in fits]


def model_time(bands, t0, b_last, s):
    band = [b for b in bands if b[0] <= s][-1]
    return band[1] * t0 + s / (b_last * band[2])


def curve_of(pts, transport, fabric):
    return sorted((p["size"], p["value"]) for p in pts
                  if p["transport"] == transport and p["bench"] == "osu_latency" and fabric in p["fabric"])


def main():
    pts = load()
    print("# Transport fit (benchmarks/fit_transports.py) from", os.path.relpath(DATA, os.path.dirname(HERE)))
    for transport, (fabric, bounds, checks) in FITS.items():
        curve = curve_of(pts, transport, fabric)
        t0, b_last, bands = fit_bands(curve, bounds)
        print(f"\n## {transport}: fit on {len(curve)} osu_latency points of '{fabric}': t(0) = {t0:.3f} us, "
              f"plateau {b_last / 1e3:.3f} GB/s")
        print("min_size_B  latency_factor  bandwidth_scale")
        for lo, lf, bs in bands:
            print(f"{lo:>10.0f}  {lf:14.3f}  {bs:15.3f}")
        print("residuals (model vs published one-way time; check curves use their own t(0) and plateau):")
        print("curve               size_B  published_us  model_us  error_%")
        for name in [fabric] + checks:
            c = curve_of(pts, transport, name)
            c_t0 = c[0][1]
            c_b = b_last if name == fabric else (c[-1][0] - c[-2][0]) / (c[-1][1] - c[-2][1])
            errs = []
            for s, t in c:
                m = model_time(bands, c_t0, c_b, s)
                errs.append(100 * (m - t) / t)
                print(f"{name[:18]:<18}  {s:>8.0f}  {t:12.2f}  {m:8.2f}  {errs[-1]:+7.1f}")
            print(f"{name}: mean |error| {sum(map(abs, errs)) / len(errs):.1f}%, worst {max(map(abs, errs)):.1f}%")

    # tcp: per-connection cap from the single-stream figure of a modern host.
    streams = [p for p in pts if p["transport"] == "tcp" and p["bench"] == "single_stream"]
    modern = [p for p in streams if "ESnet" in p["fabric"]]
    cap_Bps = sum(p["value"] for p in modern) / len(modern) * 1e9 / 8
    print(f"\n## tcp connection_rate_Bps = {cap_Bps:.4g} (mean of {len(modern)} modern-host single-stream figure(s))")
    for p in streams:
        print(f"  single stream {p['value']} {p['unit']}: {p['fabric']}")
    for p in (p for p in pts if p["transport"] == "tcp" and p["bench"] == "small_latency"):
        print(f"  small-message latency {p['value']} {p['unit']}: {p['fabric']} (platform per_message_overhead_s check)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
