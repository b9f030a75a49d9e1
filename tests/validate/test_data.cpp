// Tests of the trainer's data: Fashion-MNIST IDX reading, errors naming the file, batch filling.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "common/errors.hpp"
#include "validate/src/data.hpp"

TEST_CASE("validate::load_fashion_mnist: reads the Debian package's IDX files", "[validate]") {
  const auto test = dtsim::validate::load_fashion_mnist(dtsim::validate::default_fashion_mnist_dir(), "t10k");
  CHECK(test.count == 10000);
  CHECK(test.height == 28);
  CHECK(test.width == 28);
  CHECK(test.pixels.size() == 10000u * 28 * 28);
  // Fashion-MNIST's test split holds exactly 1,000 images of each of the 10 classes.
  std::vector<int> per_class(10, 0);
  for (int l : test.labels) per_class.at(l)++;
  for (int c : per_class) CHECK(c == 1000);
  CHECK(test.mean > 0.2f);
  CHECK(test.mean < 0.4f);
}

TEST_CASE("validate::load_fashion_mnist: missing or corrupt files name the file", "[validate]") {
  CHECK_THROWS_WITH(dtsim::validate::load_fashion_mnist("/nonexistent-dir", "train"),
                    Catch::Contains("/nonexistent-dir/train-images-idx3-ubyte.gz"));
  const auto dir = std::filesystem::temp_directory_path() / "dtsim-validate-test-idx";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "train-images-idx3-ubyte.gz") << "this is not gzip";
  std::ofstream(dir / "train-labels-idx1-ubyte.gz") << "nor this";
  CHECK_THROWS_AS(dtsim::validate::load_fashion_mnist(dir.string(), "train"), dtsim::InputError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("validate::fill_batch: shards, normalises and pads to the model's input", "[validate]") {
  const auto d = dtsim::validate::make_synthetic(16, 4, 4, 10, 3);
  const auto order = dtsim::validate::epoch_order(d.count, 9);
  CHECK(order.size() == 16u);
  std::vector<float> a(2 * 6 * 6), b(2 * 6 * 6);
  std::vector<int> la, lb;
  dtsim::validate::fill_batch(d, order, 2, 2, 6, 6, 1, a.data(), la);
  // The same samples seen as the second half of a 4-sample batch give the same tensor.
  std::vector<float> big(4 * 6 * 6);
  std::vector<int> lbig;
  dtsim::validate::fill_batch(d, order, 0, 4, 6, 6, 1, big.data(), lbig);
  CHECK(std::equal(a.begin(), a.end(), big.begin() + 2 * 36));
  CHECK(la == std::vector<int>(lbig.begin() + 2, lbig.end()));
  CHECK(a[0] == 0.f);  // the one-pixel border is padding
  CHECK(a[7] != 0.f);  // (1, 1) is the first image pixel
  CHECK_THROWS_AS(dtsim::validate::make_synthetic(0, 4, 4, 10, 1), dtsim::InputError);
}
