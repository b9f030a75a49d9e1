// Transport "pcie": intra-node device path over PCIe. DMA copies reach a fixed fraction of the nominal link
// (CUDA bandwidthTest, pinned); GPU pairs beyond the node's p2p_level have no peer-to-peer and stage through
// host memory, pipelined in chunks, through a host path both directions share (NCCL SHM); without GPUDirect
// RDMA a node's GPU bytes to and from the NIC cross a host path of their own (nccl-tests). docs/transports.md.
#include "platforms/src/transports/transports.hpp"

namespace dtsim::platforms::transport_rows {
namespace {
// PCIe 3.0 x16, per direction: 8 GT/s x 16 lanes x 128b/130b.
constexpr double PCIE_GEN3_X16_Bps = 8e9 * 16 / 8 * 128.0 / 130.0;
// CUDA samples bandwidthTest, pinned, 32 MiB, Tesla P100 PCIe on gen3 x16 (H2D, D2H). bandwidthTest of that
// era prints "MB/s" = bytes x 1024 / (ms x 2^20), i.e. units of 1.024e6 B/s:
// Microway "Tesla P100 PCI-E 16GB up close": 11688.2, 12886.0; gearshifft PR #82 (GPU's own socket):
// 12150.7, 12890.6. benchmarks/data/transports/pcie_points.csv.
constexpr double BANDWIDTHTEST_MBPS[] = {11688.2, 12886.0, 12150.7, 12890.6};
constexpr double BANDWIDTHTEST_UNIT_Bps = 1.024e6;
constexpr double mean_dma_Bps() {
  double sum = 0;
  for (double v : BANDWIDTHTEST_MBPS) sum += v * BANDWIDTHTEST_UNIT_Bps;
  return sum / (sizeof(BANDWIDTHTEST_MBPS) / sizeof(BANDWIDTHTEST_MBPS[0]));
}
// NVIDIA/nccl issue #406, the NCCL maintainer: GPUs talking through SHM (host memory) reach "9 or 6" GB/s
// where GPUs under one PCIe switch reach 12 (gen3), with NCCL's default channels; 7.5 GB/s, the midpoint, is
// a ring's rate per direction with both directions active, so the host path carries 2 x 7.5 GB/s together.
// (NVIDIA/nccl #384's 3.9 GB/s allreduce through SHM ran NCCL_MAX_NCHANNELS=1: one channel, half of it; a check.)
constexpr double NCCL_SHM_BUSBW_Bps = 7.5e9;
constexpr int NCCL_SHM_FLOWS = 2;
// nccl-tests allreduce between two nodes on 100 Gb/s InfiniBand (12.5 GB/s) with NCCL moving GPU bytes
// through host memory (no GPUDirect RDMA), each rank sending and receiving at once: NVIDIA/nccl #243
// (NCCL 2.4, one GPU per node, "always around 5.7 GB/s") and NVIDIA/nccl #465 (NCCL 2.4.8-2.5.7, 4 nodes,
// nv_peer_mem not loaded, "6 GB/s, half of what I expected"). Both directions crossed the node's
// GPU <-> NIC host path together: 2 x the mean bus bandwidth; assumed gen3 x16 GPUs (2019-2021, CUDA 10).
constexpr double NCCL_NO_GDR_BUSBW_Bps[] = {5.7e9, 6.0e9};
constexpr double mean_no_gdr_Bps() {
  double sum = 0;
  for (double v : NCCL_NO_GDR_BUSBW_Bps) sum += v;
  return sum / (sizeof(NCCL_NO_GDR_BUSBW_Bps) / sizeof(NCCL_NO_GDR_BUSBW_Bps[0]));
}
constexpr int NCCL_NO_GDR_FLOWS = 2;
}  // namespace

Transport pcie() {
  Transport t;
  t.name = "pcie";
  t.description = "intra-node device path over PCIe: DMA at 0.81 of the link; pairs beyond the p2p_level staged through "
                  "host memory in 256 KiB chunks";
  t.model = TransportModel::DEVICE_LINK;
  t.scope = TransportScope::INTRA_NODE;
  t.link_efficiency = mean_dma_Bps() / PCIE_GEN3_X16_Bps;
  t.host_staging_efficiency = NCCL_SHM_FLOWS * NCCL_SHM_BUSBW_Bps / PCIE_GEN3_X16_Bps;
  t.nic_host_efficiency = NCCL_NO_GDR_FLOWS * mean_no_gdr_Bps() / PCIE_GEN3_X16_Bps;
  t.chunk_B = STAGING_CHUNK_B;
  t.source = "CUDA bandwidthTest on P100 PCIe (Microway; gearshifft PR #82); NVIDIA/nccl #406 (SHM with default channels, gen3); "
             "NVIDIA/nccl #243 and #465 (GPU <-> NIC through host memory, 100 Gb/s InfiniBand); "
             "chunk: MVAPICH2 2.3 MV2_CUDA_BLOCK_SIZE; benchmarks/data/transports/pcie_points.csv";
  return t;
}
}  // namespace dtsim::platforms::transport_rows
