// Fashion-MNIST IDX reading (zlib gzread), synthetic data and batch filling for the validation trainer.
#include "validate/src/data.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <random>

#include "common/errors.hpp"

namespace dtsim::validate {
namespace {

// IDX magic numbers: unsigned-byte data with 3 dimensions (images) or 1 (labels).
constexpr std::uint32_t IDX_IMAGES_MAGIC = 0x00000803;
constexpr std::uint32_t IDX_LABELS_MAGIC = 0x00000801;
// Debian package dataset-fashion-mnist installs the IDX files here.
constexpr const char* DEBIAN_FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist";

std::vector<std::uint8_t> read_gz(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw InputError(fmt::format("{}: file not found (install the Debian package dataset-fashion-mnist, or set "
                                 "DTSIM_FASHION_MNIST_DIR)",
                                 path));
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw InputError(fmt::format("{}: cannot open", path));
  std::vector<std::uint8_t> out;
  std::vector<std::uint8_t> buf(1 << 20);
  while (true) {
    const int got = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (got < 0) {
      int err = 0;
      const std::string msg = gzerror(f, &err);
      gzclose(f);
      throw InputError(fmt::format("{}: not a readable gzip file ({})", path, msg));
    }
    if (got == 0) break;
    out.insert(out.end(), buf.begin(), buf.begin() + got);
  }
  gzclose(f);
  return out;
}

std::uint32_t be32(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) | b[at + 3];
}

void compute_stats(Dataset& d) {
  double sum = 0, sq = 0;
  for (auto p : d.pixels) {
    const double v = p / 255.0;
    sum += v;
    sq += v * v;
  }
  const double n = static_cast<double>(d.pixels.size());
  d.mean = static_cast<float>(sum / n);
  d.stddev = static_cast<float>(std::sqrt(std::max(1e-12, sq / n - (sum / n) * (sum / n))));
}

}  // namespace

std::string default_fashion_mnist_dir() {
  if (const char* env = std::getenv("DTSIM_FASHION_MNIST_DIR"); env && *env) return env;
  return DEBIAN_FASHION_MNIST_DIR;
}

Dataset load_fashion_mnist(const std::string& dir, const std::string& split) {
  const std::string img_path = fmt::format("{}/{}-images-idx3-ubyte.gz", dir, split);
  const std::string lab_path = fmt::format("{}/{}-labels-idx1-ubyte.gz", dir, split);
  const auto img = read_gz(img_path);
  const auto lab = read_gz(lab_path);
  if (img.size() < 16 || be32(img, 0) != IDX_IMAGES_MAGIC)
    throw InputError(fmt::format("{}: not an IDX image file (magic 0x{:08x} expected)", img_path, IDX_IMAGES_MAGIC));
  if (lab.size() < 8 || be32(lab, 0) != IDX_LABELS_MAGIC)
    throw InputError(fmt::format("{}: not an IDX label file (magic 0x{:08x} expected)", lab_path, IDX_LABELS_MAGIC));
  Dataset d;
  d.count = be32(img, 4);
  d.height = static_cast<int>(be32(img, 8));
  d.width = static_cast<int>(be32(img, 12));
  const std::size_t bytes = static_cast<std::size_t>(d.count) * d.height * d.width;
  if (img.size() != 16 + bytes)
    throw InputError(fmt::format("{}: {} bytes, header promises {}", img_path, img.size(), 16 + bytes));
  if (be32(lab, 4) != d.count || lab.size() != 8 + static_cast<std::size_t>(d.count))
    throw InputError(fmt::format("{}: label count does not match the {} images of {}", lab_path, d.count, img_path));
  d.pixels.assign(img.begin() + 16, img.end());
  d.labels.resize(d.count);
  for (std::int64_t i = 0; i < d.count; ++i) {
    d.labels[i] = lab[8 + i];
    if (d.labels[i] >= d.classes)
      throw InputError(fmt::format("{}: label {} at index {} outside [0, {})", lab_path, d.labels[i], i, d.classes));
  }
  compute_stats(d);
  return d;
}

Dataset make_synthetic(std::int64_t count, int height, int width, int classes, std::uint64_t seed) {
  if (count <= 0 || height <= 0 || width <= 0 || classes <= 0)
    throw InputError(fmt::format("synthetic data: sizes must be > 0 (count {}, {}x{}, classes {})", count, height, width,
                                 classes));
  Dataset d;
  d.count = count;
  d.height = height;
  d.width = width;
  d.classes = classes;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255), label(0, classes - 1);
  d.pixels.resize(static_cast<std::size_t>(count) * height * width);
  for (auto& p : d.pixels) p = static_cast<std::uint8_t>(byte(rng));
  d.labels.resize(count);
  for (auto& l : d.labels) l = label(rng);
  compute_stats(d);
  return d;
}

void fill_batch(const Dataset& data, const std::vector<std::int64_t>& order, std::int64_t first, std::int64_t n,
                int model_h, int model_w, int model_c, float* dst, std::vector<int>& labels) {
  labels.resize(n);
  const int off_h = (model_h - data.height) / 2, off_w = (model_w - data.width) / 2;
  const float scale = 1.f / (255.f * data.stddev), shift = data.mean / data.stddev;
  const std::size_t per_sample = static_cast<std::size_t>(model_h) * model_w * model_c;
  for (std::int64_t b = 0; b < n; ++b) {
    const std::int64_t idx = order[(first + b) % static_cast<std::int64_t>(order.size())];
    const std::uint8_t* img = data.pixels.data() + static_cast<std::size_t>(idx) * data.height * data.width;
    float* out = dst + b * per_sample;
    std::fill(out, out + per_sample, 0.f);
    for (int y = 0; y < model_h; ++y) {
      const int sy = y - off_h;
      if (sy < 0 || sy >= data.height) continue;
      for (int x = 0; x < model_w; ++x) {
        const int sx = x - off_w;
        if (sx < 0 || sx >= data.width) continue;
        const float v = static_cast<float>(img[sy * data.width + sx]) * scale - shift;
        for (int c = 0; c < model_c; ++c) out[(static_cast<std::size_t>(y) * model_w + x) * model_c + c] = v;  // NHWC
      }
    }
    labels[b] = data.labels[idx];
  }
}

std::vector<std::int64_t> epoch_order(std::int64_t count, std::uint64_t seed) {
  std::vector<std::int64_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

}  // namespace dtsim::validate
