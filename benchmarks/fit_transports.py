#!/usr/bin/env python3
"""Fits each transport's factor bands and caps from benchmarks/data/transports/osu_points.csv, and the
pcie transport's DMA efficiency and host staging path from benchmarks/data/transports/pcie_points.csv.

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
PCIE_DATA = os.path.join(HERE, "data", "transports", "pcie_points.csv")
PCIE_GEN3_X16_BPS = 8e9 * 16 / 8 * 128 / 130  # per direction
STAGING_CHUNK_B = 262144  # MVAPICH2 MV2_CUDA_BLOCK_SIZE, as rdma-host-staged
UNIT_BPS = {"MBps_1024k": 1.024e6, "GBps": 1e9}

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


def fit_pcie():
    """pcie: DMA efficiency from pinned bandwidthTest, host staging path from NCCL SHM; checks printed."""
    with open(PCIE_DATA) as f:
        rows = [r for r in csv.reader(line for line in f if not line.startswith("#"))]
    pts = [dict(bench=r[1], setup=r[2], value=float(r[4]) * UNIT_BPS[r[5]], use=r[6], src=r[7]) for r in rows]
    dma = [p["value"] for p in pts if p["bench"].startswith("bandwidthTest") and p["use"] == "fit"]
    eff = sum(dma) / len(dma) / PCIE_GEN3_X16_BPS
    shm = [p["value"] for p in pts if p["bench"] == "nccl_shm_across_sockets" and p["use"] == "fit"][0]
    host_eff = 2 * shm / PCIE_GEN3_X16_BPS  # a ring's two opposite flows share the host path
    no_gdr = [p["value"] for p in pts if p["bench"] == "nccl_allreduce_busbw_no_gdr" and p["use"] == "fit"]
    nic_eff = 2 * sum(no_gdr) / len(no_gdr) / PCIE_GEN3_X16_BPS  # send and receive shared the GPU <-> NIC path
    print(f"\n## pcie (from {os.path.relpath(PCIE_DATA, os.path.dirname(HERE))}), gen3 x16 = {PCIE_GEN3_X16_BPS / 1e9:.3f} GB/s")
    print(f"link_efficiency = {eff:.4f} (mean of {len(dma)} pinned bandwidthTest figures, {sum(dma) / len(dma) / 1e9:.3f} GB/s)")
    print(f"host_staging_efficiency = {host_eff:.4f} (2 x {shm / 1e9:.2f} GB/s NCCL SHM with its default channels, "
          f"both directions at once)")
    print(f"nic_host_efficiency = {nic_eff:.4f} (2 x the mean of {len(no_gdr)} NCCL allreduce figures without GPUDirect "
          f"RDMA, {sum(no_gdr) / len(no_gdr) / 1e9:.2f} GB/s; gen3 x16 assumed)")
    dma_Bps, host_Bps = eff * PCIE_GEN3_X16_BPS, host_eff * PCIE_GEN3_X16_BPS
    copy_s = 1e-6 + STAGING_CHUNK_B / dma_Bps  # 1 us per DMA chunk (the platforms' node.intra.latency_s)
    one_staged = STAGING_CHUNK_B / max(copy_s, STAGING_CHUNK_B / host_Bps)  # one flow through a host path
    model = {  # the model's large-message rate for each check, B/s
        "nccl_p2p_in_switch": dma_Bps,
        "nccl_allreduce_busbw_shm": host_Bps / 2, "nccl_allgather_busbw_shm": host_Bps / 2,
        "nccl_reducescatter_busbw_shm": host_Bps / 2,
        "nccl_broadcast_busbw_shm": one_staged, "nccl_reduce_busbw_shm": one_staged,
        "nccl_shm_across_sockets": host_Bps / 2, "cudaMemcpyPeer_staged": one_staged,
        "nccl_allreduce_busbw_no_gdr": nic_eff * PCIE_GEN3_X16_BPS / 2,
        "nccl_nic_on_cpu_busbw": nic_eff * 2 * PCIE_GEN3_X16_BPS / 2,  # gen4 x16: twice the gen3 link
    }
    print("check                          published_GBps  model_GBps  error_%  setup")
    for p in pts:
        if p["bench"] not in model:
            continue
        m = model[p["bench"]]
        print(f"{p['bench']:<30} {p['value'] / 1e9:14.2f}  {m / 1e9:10.2f}  {100 * (m - p['value']) / p['value']:+7.1f}  "
              f"{p['setup'][:60]}")
    for p in pts:
        if "other socket" in p["setup"]:
            print(f"not modelled: {p['bench']} {p['value'] / 1e9:.2f} GB/s ({p['setup']})")


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
    fit_pcie()
    return 0


if __name__ == "__main__":
    sys.exit(main())
