// Training data for the validation trainer: Fashion-MNIST from gzip'd IDX files (zlib), or synthetic
// samples, and the deterministic global-batch order that every rank shards the same way.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::validate {

struct Dataset {
  std::int64_t count = 0;
  int height = 0, width = 0, channels = 1;
  int classes = 10;
  std::vector<std::uint8_t> pixels;  // count x height x width (channels 1)
  std::vector<int> labels;           // count
  float mean = 0, stddev = 1;        // of the pixel values / 255, for normalisation
};

// Reads `<dir>/<split>-images-idx3-ubyte.gz` and `<dir>/<split>-labels-idx1-ubyte.gz` (split "train"
// or "t10k"). Throws InputError naming the file when it is missing, truncated or not IDX.
Dataset load_fashion_mnist(const std::string& dir, const std::string& split);

// The Debian package's location (/usr/share/datasets/fashion-mnist) unless $DTSIM_FASHION_MNIST_DIR is set.
std::string default_fashion_mnist_dir();

// `count` reproducible random images (uniform bytes) with random labels, for --data synthetic.
Dataset make_synthetic(std::int64_t count, int height, int width, int classes, std::uint64_t seed);

// Writes samples [first, first + n) of `order` into `dst` (n x H x W x C, normalised, zero-padded or
// centre-cropped to the model's H x W) and their labels into `labels`.
void fill_batch(const Dataset& data, const std::vector<std::int64_t>& order, std::int64_t first, std::int64_t n,
                int model_h, int model_w, int model_c, float* dst, std::vector<int>& labels);

// A reproducible permutation of [0, count): the global sample order of one epoch.
std::vector<std::int64_t> epoch_order(std::int64_t count, std::uint64_t seed);

}  // namespace dtsim::validate
