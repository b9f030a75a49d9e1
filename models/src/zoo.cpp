// The built-in model zoo, written layer by layer after the published reference implementations
// (torchvision, Cadene's pretrainedmodels, LeCun 1998, He et al. 2016); see models/README.md.
#include "models/zoo.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <functional>
#include <map>

#include "common/errors.hpp"
#include "common/text.hpp"
#include "models/hf_config.hpp"
#include "models/src/zoo_transformers.hpp"
#include "models/yaml_io.hpp"

namespace dtsim::models {

namespace {

// Small helper that names layers and keeps the last output, so builders read like the references.
class Builder {
 public:
  explicit Builder(Model& m) : m_(m) {}

  std::string conv(const std::string& name, const std::string& in, std::int64_t out, int kh, int kw, int sh, int sw,
                   int ph, int pw, bool bias = false, int groups = 1) {
    LayerParams p;
    p.out_channels = out;
    p.kernel_h = kh;
    p.kernel_w = kw;
    p.stride_h = sh;
    p.stride_w = sw;
    p.pad_h = ph;
    p.pad_w = pw;
    p.bias = bias;
    p.groups = groups;
    return m_.add(name, OpKind::CONV2D, p, {in}).name;
  }
  std::string conv(const std::string& name, const std::string& in, std::int64_t out, int k, int s, int pad,
                   bool bias = false) {
    return conv(name, in, out, k, k, s, s, pad, pad, bias);
  }
  std::string bn(const std::string& name, const std::string& in, double eps = 1e-5) {
    LayerParams p;
    p.bn_epsilon = eps;
    return m_.add(name, OpKind::BATCH_NORM, p, {in}).name;
  }
  std::string unary(const std::string& name, OpKind op, const std::string& in) {
    return m_.add(name, op, LayerParams{}, {in}).name;
  }
  std::string relu(const std::string& name, const std::string& in) { return unary(name, OpKind::RELU, in); }
  std::string pool(const std::string& name, OpKind op, const std::string& in, int k, int s, int pad,
                   bool ceil_mode = false, bool count_include_pad = true) {
    LayerParams p;
    p.kernel_h = p.kernel_w = k;
    p.stride_h = p.stride_w = s;
    p.pad_h = p.pad_w = pad;
    p.ceil_mode = ceil_mode;
    p.count_include_pad = count_include_pad;
    return m_.add(name, op, p, {in}).name;
  }
  std::string fc(const std::string& name, const std::string& in, std::int64_t out, bool bias = true) {
    LayerParams p;
    p.out_channels = out;
    p.bias = bias;
    return m_.add(name, OpKind::FULLY_CONNECTED, p, {in}).name;
  }
  std::string dropout(const std::string& name, const std::string& in, double ratio) {
    LayerParams p;
    p.dropout_ratio = ratio;
    return m_.add(name, OpKind::DROPOUT, p, {in}).name;
  }
  std::string multi(const std::string& name, OpKind op, std::vector<std::string> ins) {
    return m_.add(name, op, LayerParams{}, std::move(ins)).name;
  }
  // conv (no bias) + BN + ReLU: torchvision's BasicConv2d (Inception) and the ResNet stem.
  std::string conv_bn_relu(const std::string& prefix, const std::string& in, std::int64_t out, int kh, int kw,
                           int sh, int sw, int ph, int pw, double eps) {
    const auto c = conv(prefix + ".conv", in, out, kh, kw, sh, sw, ph, pw, false);
    const auto b = bn(prefix + ".bn", c, eps);
    return relu(prefix + ".relu", b);
  }
  std::string loss(const std::string& in) { return unary("loss", OpKind::SOFTMAX_LOSS, in); }

 private:
  Model& m_;
};

struct Defaults {
  int size;      // input height and width
  int channels;
  int classes;
};

// --- LeNet-5 -------------------------------------------------------------------------------------
// LeCun et al. 1998 classic form: C1 6@5x5, S2 avg-pool 2x2, C3 16@5x5 (full connection table),
// S4 avg-pool, C5 120@5x5, F6 84, output 10; tanh activations; 61,706 parameters on 32x32x1.
// On inputs smaller than 32 (e.g. 28x28 MNIST) conv1 is padded so that its output stays 28x28.
void build_lenet5(Model& m, int classes) {
  Builder b(m);
  const auto& in = m.input_shape();
  const int pad = static_cast<int>(std::max<std::int64_t>(0, (32 - std::min(in.h, in.w) + 1) / 2));
  auto x = b.conv("conv1", "data", 6, 5, 5, 1, 1, pad, pad, true);
  x = b.unary("tanh1", OpKind::TANH, x);
  x = b.pool("pool1", OpKind::AVG_POOL, x, 2, 2, 0);
  x = b.conv("conv2", x, 16, 5, 1, 0, true);
  x = b.unary("tanh2", OpKind::TANH, x);
  x = b.pool("pool2", OpKind::AVG_POOL, x, 2, 2, 0);
  x = b.conv("conv3", x, 120, 5, 1, 0, true);
  x = b.unary("tanh3", OpKind::TANH, x);
  x = b.unary("flatten", OpKind::FLATTEN, x);
  x = b.fc("fc1", x, 84);
  x = b.unary("tanh4", OpKind::TANH, x);
  x = b.fc("fc2", x, classes);
  b.loss(x);
}

// --- AlexNet for CIFAR (32x32) ----------------------------------------------------------------------
// bearpaw/pytorch-classification models/cifar/alexnet.py (Wei Yang), the most used CIFAR port of
// AlexNet: the torchvision feature stack with conv1 padded to 5, 2x2 max pools, and the 4096-wide
// classifier replaced by one linear layer; 2,472,266 parameters for 10 classes (its README: 2.47M).
void build_alexnet_cifar(Model& m, int classes) {
  Builder b(m);
  auto x = b.relu("relu1", b.conv("conv1", "data", 64, 11, 4, 5, true));
  x = b.pool("pool1", OpKind::MAX_POOL, x, 2, 2, 0);
  x = b.relu("relu2", b.conv("conv2", x, 192, 5, 1, 2, true));
  x = b.pool("pool2", OpKind::MAX_POOL, x, 2, 2, 0);
  x = b.relu("relu3", b.conv("conv3", x, 384, 3, 1, 1, true));
  x = b.relu("relu4", b.conv("conv4", x, 256, 3, 1, 1, true));
  x = b.relu("relu5", b.conv("conv5", x, 256, 3, 1, 1, true));
  x = b.pool("pool5", OpKind::MAX_POOL, x, 2, 2, 0);
  x = b.unary("flatten", OpKind::FLATTEN, x);
  x = b.fc("classifier", x, classes);
  b.loss(x);
}

// --- AlexNet (torchvision) -------------------------------------------------------------------------
// torchvision.models.alexnet: the one-GPU variant without LRN; 61,100,840 parameters at 224x224.
// torchvision's AdaptiveAvgPool2d(6) is the identity at 224 and is left out; on other inputs the
// classifier takes whatever the features produce.
void build_alexnet(Model& m, int classes) {
  Builder b(m);
  auto x = b.relu("relu1", b.conv("conv1", "data", 64, 11, 4, 2, true));
  x = b.pool("pool1", OpKind::MAX_POOL, x, 3, 2, 0);
  x = b.relu("relu2", b.conv("conv2", x, 192, 5, 1, 2, true));
  x = b.pool("pool2", OpKind::MAX_POOL, x, 3, 2, 0);
  x = b.relu("relu3", b.conv("conv3", x, 384, 3, 1, 1, true));
  x = b.relu("relu4", b.conv("conv4", x, 256, 3, 1, 1, true));
  x = b.relu("relu5", b.conv("conv5", x, 256, 3, 1, 1, true));
  x = b.pool("pool5", OpKind::MAX_POOL, x, 3, 2, 0);
  x = b.unary("flatten", OpKind::FLATTEN, x);
  x = b.dropout("drop6", x, 0.5);
  x = b.relu("relu6", b.fc("fc6", x, 4096));
  x = b.dropout("drop7", x, 0.5);
  x = b.relu("relu7", b.fc("fc7", x, 4096));
  x = b.fc("fc8", x, classes);
  b.loss(x);
}

// --- VGG-16 (torchvision, configuration D without BN) ----------------------------------------------
// 138,357,544 parameters at 224x224 (AdaptiveAvgPool2d(7) is the identity there and is left out).
void build_vgg16(Model& m, int classes) {
  Builder b(m);
  const std::array<std::array<int, 3>, 5> stages = {{{64, 2, 0}, {128, 2, 0}, {256, 3, 0}, {512, 3, 0}, {512, 3, 0}}};
  std::string x = "data";
  for (std::size_t s = 0; s < stages.size(); ++s) {
    for (int i = 1; i <= stages[s][1]; ++i) {
      const auto id = fmt::format("{}_{}", s + 1, i);
      x = b.relu("relu" + id, b.conv("conv" + id, x, stages[s][0], 3, 1, 1, true));
    }
    x = b.pool(fmt::format("pool{}", s + 1), OpKind::MAX_POOL, x, 2, 2, 0);
  }
  x = b.unary("flatten", OpKind::FLATTEN, x);
  x = b.dropout("drop6", b.relu("relu6", b.fc("fc6", x, 4096)), 0.5);
  x = b.dropout("drop7", b.relu("relu7", b.fc("fc7", x, 4096)), 0.5);
  x = b.fc("fc8", x, classes);
  b.loss(x);
}

// --- ResNets (torchvision v1.5: stride on the 3x3 conv of the bottleneck) --------------------------
std::string basic_block(Builder& b, const std::string& p, const std::string& in, std::int64_t in_c, std::int64_t out_c,
                        int stride) {
  auto x = b.relu(p + ".relu1", b.bn(p + ".bn1", b.conv(p + ".conv1", in, out_c, 3, stride, 1)));
  x = b.bn(p + ".bn2", b.conv(p + ".conv2", x, out_c, 3, 1, 1));
  std::string identity = in;
  if (stride != 1 || in_c != out_c)
    identity = b.bn(p + ".downsample.bn", b.conv(p + ".downsample.conv", in, out_c, 1, stride, 0));
  return b.relu(p + ".relu", b.multi(p + ".add", OpKind::ADD, {x, identity}));
}

std::string bottleneck(Builder& b, const std::string& p, const std::string& in, std::int64_t in_c,
                       std::int64_t width, int stride) {
  const std::int64_t out_c = width * 4;
  auto x = b.relu(p + ".relu1", b.bn(p + ".bn1", b.conv(p + ".conv1", in, width, 1, 1, 0)));
  x = b.relu(p + ".relu2", b.bn(p + ".bn2", b.conv(p + ".conv2", x, width, 3, stride, 1)));
  x = b.bn(p + ".bn3", b.conv(p + ".conv3", x, out_c, 1, 1, 0));
  std::string identity = in;
  if (stride != 1 || in_c != out_c)
    identity = b.bn(p + ".downsample.bn", b.conv(p + ".downsample.conv", in, out_c, 1, stride, 0));
  return b.relu(p + ".relu", b.multi(p + ".add", OpKind::ADD, {x, identity}));
}

void build_imagenet_resnet(Model& m, int classes, const std::array<int, 4>& blocks, bool use_bottleneck) {
  Builder b(m);
  auto x = b.relu("relu", b.bn("bn1", b.conv("conv1", "data", 64, 7, 2, 3)));
  x = b.pool("maxpool", OpKind::MAX_POOL, x, 3, 2, 1);
  std::int64_t in_c = 64;
  for (int s = 0; s < 4; ++s) {
    const std::int64_t width = std::int64_t{64} << s;
    for (int i = 0; i < blocks[static_cast<std::size_t>(s)]; ++i) {
      const int stride = (s > 0 && i == 0) ? 2 : 1;
      const auto p = fmt::format("layer{}.{}", s + 1, i);
      if (use_bottleneck) {
        x = bottleneck(b, p, x, in_c, width, stride);
        in_c = width * 4;
      } else {
        x = basic_block(b, p, x, in_c, width, stride);
        in_c = width;
      }
    }
  }
  x = b.unary("avgpool", OpKind::GLOBAL_AVG_POOL, x);
  x = b.unary("flatten", OpKind::FLATTEN, x);
  x = b.fc("fc", x, classes);
  b.loss(x);
}

// --- ResNet-20 for CIFAR (He et al. 2016, section 4.2) ---------------------------------------------
// 3x3 conv 16, then 3 stages of 3 basic blocks with 16/32/64 channels (stride 2 at stages 2 and 3),
// global average pooling, FC. Shortcuts: identity, or 1x1 conv + BN where the shape changes
// (the paper's option B; option A's zero padding has no parameters).
void build_resnet20(Model& m, int classes) {
  Builder b(m);
  auto x = b.relu("relu", b.bn("bn1", b.conv("conv1", "data", 16, 3, 1, 1)));
  std::int64_t in_c = 16;
  for (int s = 0; s < 3; ++s) {
    const std::int64_t width = std::int64_t{16} << s;
    for (int i = 0; i < 3; ++i) {
      const int stride = (s > 0 && i == 0) ? 2 : 1;
      x = basic_block(b, fmt::format("layer{}.{}", s + 1, i), x, in_c, width, stride);
      in_c = width;
    }
  }
  x = b.unary("avgpool", OpKind::GLOBAL_AVG_POOL, x);
  x = b.unary("flatten", OpKind::FLATTEN, x);
  x = b.fc("fc", x, classes);
  b.loss(x);
}

// --- DenseNet-121 (torchvision: growth 32, blocks 6-12-24-16, bottleneck 4*32, compression 0.5) ------
void build_densenet121(Model& m, int classes) {
  Builder b(m);
  constexpr std::int64_t GROWTH = 32, BN_SIZE = 4;
  constexpr std::array<int, 4> BLOCKS = {6, 12, 24, 16};
  auto x = b.conv("features.conv0", "data", 64, 7, 2, 3);
  x = b.relu("features.relu0", b.bn("features.norm0", x));
  x = b.pool("features.pool0", OpKind::MAX_POOL, x, 3, 2, 1);
  std::int64_t channels = 64;
  for (std::size_t s = 0; s < BLOCKS.size(); ++s) {
    std::vector<std::string> features = {x};
    for (int i = 1; i <= BLOCKS[s]; ++i) {
      const auto p = fmt::format("features.denseblock{}.denselayer{}", s + 1, i);
      // torchvision concatenates every earlier feature map at the start of each dense layer.
      const std::string cat = features.size() == 1 ? features[0] : b.multi(p + ".cat", OpKind::CONCAT, features);
      auto y = b.relu(p + ".relu1", b.bn(p + ".norm1", cat));
      y = b.conv(p + ".conv1", y, BN_SIZE * GROWTH, 1, 1, 0);
      y = b.relu(p + ".relu2", b.bn(p + ".norm2", y));
      y = b.conv(p + ".conv2", y, GROWTH, 3, 1, 1);
      features.push_back(y);
      channels += GROWTH;
    }
    x = b.multi(fmt::format("features.denseblock{}.cat", s + 1), OpKind::CONCAT, features);
    if (s + 1 < BLOCKS.size()) {
      const auto p = fmt::format("features.transition{}", s + 1);
      x = b.relu(p + ".relu", b.bn(p + ".norm", x));
      channels /= 2;
      x = b.conv(p + ".conv", x, channels, 1, 1, 0);
      x = b.pool(p + ".pool", OpKind::AVG_POOL, x, 2, 2, 0);
    }
  }
  x = b.relu("features.relu5", b.bn("features.norm5", x));
  x = b.unary("avgpool", OpKind::GLOBAL_AVG_POOL, x);
  x = b.unary("flatten", OpKind::FLATTEN, x);
  x = b.fc("classifier", x, classes);
  b.loss(x);
}

// --- Inception v3 (torchvision, aux_logits=False, transform_input irrelevant to costs) ----------------
constexpr double INCEPTION_BN_EPS = 1e-3;  // torchvision BasicConv2d and TF-slim both use 0.001

struct Inception {
  Builder& b;
  std::string cbr_hw(const std::string& p, const std::string& in, std::int64_t out, int kh, int kw, int s, int ph,
                     int pw) {
    return b.conv_bn_relu(p, in, out, kh, kw, s, s, ph, pw, INCEPTION_BN_EPS);
  }
  std::string cbr(const std::string& p, const std::string& in, std::int64_t out, int k, int s, int pad) {
    return cbr_hw(p, in, out, k, k, s, pad, pad);
  }
};

std::string v3_block_a(Inception& inc, const std::string& p, const std::string& in, std::int64_t pool_features) {
  auto b1 = inc.cbr(p + ".branch1x1", in, 64, 1, 1, 0);
  auto b5 = inc.cbr(p + ".branch5x5_2", inc.cbr(p + ".branch5x5_1", in, 48, 1, 1, 0), 64, 5, 1, 2);
  auto d = inc.cbr(p + ".branch3x3dbl_1", in, 64, 1, 1, 0);
  d = inc.cbr(p + ".branch3x3dbl_2", d, 96, 3, 1, 1);
  d = inc.cbr(p + ".branch3x3dbl_3", d, 96, 3, 1, 1);
  auto bp = inc.b.pool(p + ".branch_pool.avg", OpKind::AVG_POOL, in, 3, 1, 1);
  bp = inc.cbr(p + ".branch_pool", bp, pool_features, 1, 1, 0);
  return inc.b.multi(p + ".cat", OpKind::CONCAT, {b1, b5, d, bp});
}

std::string v3_block_b(Inception& inc, const std::string& p, const std::string& in) {
  auto b3 = inc.cbr(p + ".branch3x3", in, 384, 3, 2, 0);
  auto d = inc.cbr(p + ".branch3x3dbl_1", in, 64, 1, 1, 0);
  d = inc.cbr(p + ".branch3x3dbl_2", d, 96, 3, 1, 1);
  d = inc.cbr(p + ".branch3x3dbl_3", d, 96, 3, 2, 0);
  auto bp = inc.b.pool(p + ".branch_pool", OpKind::MAX_POOL, in, 3, 2, 0);
  return inc.b.multi(p + ".cat", OpKind::CONCAT, {b3, d, bp});
}

std::string v3_block_c(Inception& inc, const std::string& p, const std::string& in, std::int64_t c7) {
  auto b1 = inc.cbr(p + ".branch1x1", in, 192, 1, 1, 0);
  auto s = inc.cbr(p + ".branch7x7_1", in, c7, 1, 1, 0);
  s = inc.cbr_hw(p + ".branch7x7_2", s, c7, 1, 7, 1, 0, 3);
  s = inc.cbr_hw(p + ".branch7x7_3", s, 192, 7, 1, 1, 3, 0);
  auto d = inc.cbr(p + ".branch7x7dbl_1", in, c7, 1, 1, 0);
  d = inc.cbr_hw(p + ".branch7x7dbl_2", d, c7, 7, 1, 1, 3, 0);
  d = inc.cbr_hw(p + ".branch7x7dbl_3", d, c7, 1, 7, 1, 0, 3);
  d = inc.cbr_hw(p + ".branch7x7dbl_4", d, c7, 7, 1, 1, 3, 0);
  d = inc.cbr_hw(p + ".branch7x7dbl_5", d, 192, 1, 7, 1, 0, 3);
  auto bp = inc.b.pool(p + ".branch_pool.avg", OpKind::AVG_POOL, in, 3, 1, 1);
  bp = inc.cbr(p + ".branch_pool", bp, 192, 1, 1, 0);
  return inc.b.multi(p + ".cat", OpKind::CONCAT, {b1, s, d, bp});
}

std::string v3_block_d(Inception& inc, const std::string& p, const std::string& in) {
  auto b3 = inc.cbr(p + ".branch3x3_2", inc.cbr(p + ".branch3x3_1", in, 192, 1, 1, 0), 320, 3, 2, 0);
  auto s = inc.cbr(p + ".branch7x7x3_1", in, 192, 1, 1, 0);
  s = inc.cbr_hw(p + ".branch7x7x3_2", s, 192, 1, 7, 1, 0, 3);
  s = inc.cbr_hw(p + ".branch7x7x3_3", s, 192, 7, 1, 1, 3, 0);
  s = inc.cbr(p + ".branch7x7x3_4", s, 192, 3, 2, 0);
  auto bp = inc.b.pool(p + ".branch_pool", OpKind::MAX_POOL, in, 3, 2, 0);
  return inc.b.multi(p + ".cat", OpKind::CONCAT, {b3, s, bp});
}

std::string v3_block_e(Inception& inc, const std::string& p, const std::string& in) {
  auto b1 = inc.cbr(p + ".branch1x1", in, 320, 1, 1, 0);
  auto t = inc.cbr(p + ".branch3x3_1", in, 384, 1, 1, 0);
  auto ta = inc.cbr_hw(p + ".branch3x3_2a", t, 384, 1, 3, 1, 0, 1);
  auto tb = inc.cbr_hw(p + ".branch3x3_2b", t, 384, 3, 1, 1, 1, 0);
  auto d = inc.cbr(p + ".branch3x3dbl_1", in, 448, 1, 1, 0);
  d = inc.cbr(p + ".branch3x3dbl_2", d, 384, 3, 1, 1);
  auto da = inc.cbr_hw(p + ".branch3x3dbl_3a", d, 384, 1, 3, 1, 0, 1);
  auto db = inc.cbr_hw(p + ".branch3x3dbl_3b", d, 384, 3, 1, 1, 1, 0);
  auto bp = inc.b.pool(p + ".branch_pool.avg", OpKind::AVG_POOL, in, 3, 1, 1);
  bp = inc.cbr(p + ".branch_pool", bp, 192, 1, 1, 0);
  return inc.b.multi(p + ".cat", OpKind::CONCAT, {b1, ta, tb, da, db, bp});
}

void build_inception_v3(Model& m, int classes) {
  Builder b(m);
  Inception inc{b};
  auto x = inc.cbr("Conv2d_1a_3x3", "data", 32, 3, 2, 0);
  x = inc.cbr("Conv2d_2a_3x3", x, 32, 3, 1, 0);
  x = inc.cbr("Conv2d_2b_3x3", x, 64, 3, 1, 1);
  x = b.pool("maxpool1", OpKind::MAX_POOL, x, 3, 2, 0);
  x = inc.cbr("Conv2d_3b_1x1", x, 80, 1, 1, 0);
  x = inc.cbr("Conv2d_4a_3x3", x, 192, 3, 1, 0);
  x = b.pool("maxpool2", OpKind::MAX_POOL, x, 3, 2, 0);
  x = v3_block_a(inc, "Mixed_5b", x, 32);
  x = v3_block_a(inc, "Mixed_5c", x, 64);
  x = v3_block_a(inc, "Mixed_5d", x, 64);
  x = v3_block_b(inc, "Mixed_6a", x);
  x = v3_block_c(inc, "Mixed_6b", x, 128);
  x = v3_block_c(inc, "Mixed_6c", x, 160);
  x = v3_block_c(inc, "Mixed_6d", x, 160);
  x = v3_block_c(inc, "Mixed_6e", x, 192);
  x = v3_block_d(inc, "Mixed_7a", x);
  x = v3_block_e(inc, "Mixed_7b", x);
  x = v3_block_e(inc, "Mixed_7c", x);
  x = b.unary("avgpool", OpKind::GLOBAL_AVG_POOL, x);
  x = b.dropout("dropout", x, 0.5);
  x = b.unary("flatten", OpKind::FLATTEN, x);
  x = b.fc("fc", x, classes);
  b.loss(x);
}

// --- Inception v4 (Szegedy et al. 2016 as in Cadene pretrainedmodels / TF-slim; ImageNet 1000 classes) ---
std::string v4_stem(Inception& inc, const std::string& in) {
  auto x = inc.cbr("features.0", in, 32, 3, 2, 0);
  x = inc.cbr("features.1", x, 32, 3, 1, 0);
  x = inc.cbr("features.2", x, 64, 3, 1, 1);
  // Mixed_3a
  auto mp = inc.b.pool("features.3.maxpool", OpKind::MAX_POOL, x, 3, 2, 0);
  auto cv = inc.cbr("features.3.conv", x, 96, 3, 2, 0);
  x = inc.b.multi("features.3.cat", OpKind::CONCAT, {mp, cv});
  // Mixed_4a
  auto b0 = inc.cbr("features.4.branch0.0", x, 64, 1, 1, 0);
  b0 = inc.cbr("features.4.branch0.1", b0, 96, 3, 1, 0);
  auto b1 = inc.cbr("features.4.branch1.0", x, 64, 1, 1, 0);
  b1 = inc.cbr_hw("features.4.branch1.1", b1, 64, 1, 7, 1, 0, 3);
  b1 = inc.cbr_hw("features.4.branch1.2", b1, 64, 7, 1, 1, 3, 0);
  b1 = inc.cbr("features.4.branch1.3", b1, 96, 3, 1, 0);
  x = inc.b.multi("features.4.cat", OpKind::CONCAT, {b0, b1});
  // Mixed_5a
  cv = inc.cbr("features.5.conv", x, 192, 3, 2, 0);
  mp = inc.b.pool("features.5.maxpool", OpKind::MAX_POOL, x, 3, 2, 0);
  return inc.b.multi("features.5.cat", OpKind::CONCAT, {cv, mp});
}

std::string v4_block_a(Inception& inc, const std::string& p, const std::string& in) {
  auto b0 = inc.cbr(p + ".branch0", in, 96, 1, 1, 0);
  auto b1 = inc.cbr(p + ".branch1.1", inc.cbr(p + ".branch1.0", in, 64, 1, 1, 0), 96, 3, 1, 1);
  auto b2 = inc.cbr(p + ".branch2.0", in, 64, 1, 1, 0);
  b2 = inc.cbr(p + ".branch2.1", b2, 96, 3, 1, 1);
  b2 = inc.cbr(p + ".branch2.2", b2, 96, 3, 1, 1);
  // count_include_pad=False in the reference; costs are the same.
  auto b3 = inc.b.pool(p + ".branch3.0", OpKind::AVG_POOL, in, 3, 1, 1, false, false);
  b3 = inc.cbr(p + ".branch3.1", b3, 96, 1, 1, 0);
  return inc.b.multi(p + ".cat", OpKind::CONCAT, {b0, b1, b2, b3});
}

std::string v4_reduction_a(Inception& inc, const std::string& p, const std::string& in) {
  auto b0 = inc.cbr(p + ".branch0", in, 384, 3, 2, 0);
  auto b1 = inc.cbr(p + ".branch1.0", in, 192, 1, 1, 0);
  b1 = inc.cbr(p + ".branch1.1", b1, 224, 3, 1, 1);
  b1 = inc.cbr(p + ".branch1.2", b1, 256, 3, 2, 0);
  auto b2 = inc.b.pool(p + ".branch2", OpKind::MAX_POOL, in, 3, 2, 0);
  return inc.b.multi(p + ".cat", OpKind::CONCAT, {b0, b1, b2});
}

std::string v4_block_b(Inception& inc, const std::string& p, const std::string& in) {
  auto b0 = inc.cbr(p + ".branch0", in, 384, 1, 1, 0);
  auto b1 = inc.cbr(p + ".branch1.0", in, 192, 1, 1, 0);
  b1 = inc.cbr_hw(p + ".branch1.1", b1, 224, 1, 7, 1, 0, 3);
  b1 = inc.cbr_hw(p + ".branch1.2", b1, 256, 7, 1, 1, 3, 0);
  auto b2 = inc.cbr(p + ".branch2.0", in, 192, 1, 1, 0);
  b2 = inc.cbr_hw(p + ".branch2.1", b2, 192, 7, 1, 1, 3, 0);
  b2 = inc.cbr_hw(p + ".branch2.2", b2, 224, 1, 7, 1, 0, 3);
  b2 = inc.cbr_hw(p + ".branch2.3", b2, 224, 7, 1, 1, 3, 0);
  b2 = inc.cbr_hw(p + ".branch2.4", b2, 256, 1, 7, 1, 0, 3);
  auto b3 = inc.b.pool(p + ".branch3.0", OpKind::AVG_POOL, in, 3, 1, 1, false, false);
  b3 = inc.cbr(p + ".branch3.1", b3, 128, 1, 1, 0);
  return inc.b.multi(p + ".cat", OpKind::CONCAT, {b0, b1, b2, b3});
}

std::string v4_reduction_b(Inception& inc, const std::string& p, const std::string& in) {
  auto b0 = inc.cbr(p + ".branch0.1", inc.cbr(p + ".branch0.0", in, 192, 1, 1, 0), 192, 3, 2, 0);
  auto b1 = inc.cbr(p + ".branch1.0", in, 256, 1, 1, 0);
  b1 = inc.cbr_hw(p + ".branch1.1", b1, 256, 1, 7, 1, 0, 3);
  b1 = inc.cbr_hw(p + ".branch1.2", b1, 320, 7, 1, 1, 3, 0);
  b1 = inc.cbr(p + ".branch1.3", b1, 320, 3, 2, 0);
  auto b2 = inc.b.pool(p + ".branch2", OpKind::MAX_POOL, in, 3, 2, 0);
  return inc.b.multi(p + ".cat", OpKind::CONCAT, {b0, b1, b2});
}

std::string v4_block_c(Inception& inc, const std::string& p, const std::string& in) {
  auto b0 = inc.cbr(p + ".branch0", in, 256, 1, 1, 0);
  auto b1 = inc.cbr(p + ".branch1_0", in, 384, 1, 1, 0);
  auto b1a = inc.cbr_hw(p + ".branch1_1a", b1, 256, 1, 3, 1, 0, 1);
  auto b1b = inc.cbr_hw(p + ".branch1_1b", b1, 256, 3, 1, 1, 1, 0);
  auto b2 = inc.cbr(p + ".branch2_0", in, 384, 1, 1, 0);
  b2 = inc.cbr_hw(p + ".branch2_1", b2, 448, 3, 1, 1, 1, 0);
  b2 = inc.cbr_hw(p + ".branch2_2", b2, 512, 1, 3, 1, 0, 1);
  auto b2a = inc.cbr_hw(p + ".branch2_3a", b2, 256, 1, 3, 1, 0, 1);
  auto b2b = inc.cbr_hw(p + ".branch2_3b", b2, 256, 3, 1, 1, 1, 0);
  auto b3 = inc.b.pool(p + ".branch3.0", OpKind::AVG_POOL, in, 3, 1, 1, false, false);
  b3 = inc.cbr(p + ".branch3.1", b3, 256, 1, 1, 0);
  return inc.b.multi(p + ".cat", OpKind::CONCAT, {b0, b1a, b1b, b2a, b2b, b3});
}

void build_inception_v4(Model& m, int classes) {
  Builder b(m);
  Inception inc{b};
  auto x = v4_stem(inc, "data");
  int index = 6;
  for (int i = 0; i < 4; ++i) x = v4_block_a(inc, fmt::format("features.{}", index++), x);
  x = v4_reduction_a(inc, fmt::format("features.{}", index++), x);
  for (int i = 0; i < 7; ++i) x = v4_block_b(inc, fmt::format("features.{}", index++), x);
  x = v4_reduction_b(inc, fmt::format("features.{}", index++), x);
  for (int i = 0; i < 3; ++i) x = v4_block_c(inc, fmt::format("features.{}", index++), x);
  x = b.unary("avgpool", OpKind::GLOBAL_AVG_POOL, x);
  x = b.unary("flatten", OpKind::FLATTEN, x);
  x = b.fc("last_linear", x, classes);
  b.loss(x);
}

struct ZooEntry {
  Defaults defaults;
  std::function<void(Model&, int classes)> build;
};

const std::map<std::string, ZooEntry>& zoo() {
  static const std::map<std::string, ZooEntry> entries = {
      {"lenet5", {{32, 1, 10}, build_lenet5}},
      {"alexnet", {{224, 3, 1000}, build_alexnet}},
      {"alexnet_cifar", {{32, 3, 10}, build_alexnet_cifar}},
      {"vgg16", {{224, 3, 1000}, build_vgg16}},
      {"resnet18", {{224, 3, 1000}, [](Model& m, int k) { build_imagenet_resnet(m, k, {2, 2, 2, 2}, false); }}},
      {"resnet34", {{224, 3, 1000}, [](Model& m, int k) { build_imagenet_resnet(m, k, {3, 4, 6, 3}, false); }}},
      {"resnet50", {{224, 3, 1000}, [](Model& m, int k) { build_imagenet_resnet(m, k, {3, 4, 6, 3}, true); }}},
      {"resnet101", {{224, 3, 1000}, [](Model& m, int k) { build_imagenet_resnet(m, k, {3, 4, 23, 3}, true); }}},
      {"resnet152", {{224, 3, 1000}, [](Model& m, int k) { build_imagenet_resnet(m, k, {3, 8, 36, 3}, true); }}},
      {"resnet20", {{32, 3, 10}, build_resnet20}},
      {"inception_v3", {{299, 3, 1000}, build_inception_v3}},
      {"inception_v4", {{299, 3, 1000}, build_inception_v4}},
      {"densenet121", {{224, 3, 1000}, build_densenet121}},
  };
  return entries;
}

// Largest input side and class count accepted from options (sizes beyond are surely typos).
constexpr int MAX_INPUT_SIDE = 1 << 15;
constexpr int MAX_CLASSES = 1 << 24;
constexpr int MAX_CHANNELS = 1 << 16;

void check_options(const ModelOptions& o, const std::string& what) {
  if (o.batch < 1) throw InputError(fmt::format("{}: batch must be >= 1, got {}", what, o.batch));
  for (const auto& [name, side] : {std::pair{"input_h", o.input_h}, std::pair{"input_w", o.input_w}})
    if (side < 0 || side > MAX_INPUT_SIDE)
      throw InputError(
          fmt::format("{}: {} must be in 1..{} (0 = the model's default), got {}", what, name, MAX_INPUT_SIDE, side));
  if (o.channels < 0 || o.channels > MAX_CHANNELS)
    throw InputError(fmt::format("{}: channels must be in 1..{}, got {}", what, MAX_CHANNELS, o.channels));
  if (o.classes < 0 || o.classes > MAX_CLASSES)
    throw InputError(fmt::format("{}: classes must be in 1..{}, got {}", what, MAX_CLASSES, o.classes));
}

}  // namespace

std::vector<std::string> zoo_names() {
  return {"lenet5",    "alexnet",   "alexnet_cifar", "vgg16",     "resnet18",     "resnet34",     "resnet50",
          "resnet101", "resnet152", "resnet20",  "inception_v3", "inception_v4", "densenet121"};
}

Model build_zoo_model(const std::string& name, const ModelOptions& options) {
  if (const TransformerConfig* t = transformer_zoo_config_or_null(name)) {
    check_options(options, fmt::format("model '{}'", name));
    return build_transformer(*t, options);
  }
  const auto it = zoo().find(name);
  if (it == zoo().end()) {
    std::string known;
    for (const auto& n : zoo_names()) known += (known.empty() ? "" : ", ") + n;
    for (const auto& n : transformer_zoo_names()) known += ", " + n;
    throw InputError(fmt::format(
        "unknown model '{}' (known: {}; or give a path to a YAML model file or a Hugging Face config.json)",
        printable(name), known));
  }
  check_options(options, fmt::format("model '{}'", name));
  if (options.seq_len || options.flash_attention || options.mlm_predictions)
    throw InputError(fmt::format("model '{}' is a CNN: --seq-len, --flash-attention and --mlm-predictions apply to "
                                 "transformers",
                                 name));
  if (options.tensor_parallel > 1 || options.context_parallel > 1 || options.expert_parallel > 1)
    throw InputError(fmt::format("model '{}' is a CNN: --tp, --cp and --ep apply to transformers", name));
  const Defaults& d = it->second.defaults;
  const Shape input{options.batch, options.channels ? options.channels : d.channels,
                    options.input_h ? options.input_h : d.size, options.input_w ? options.input_w : d.size};
  Model m(name, input);
  it->second.build(m, options.classes ? options.classes : d.classes);
  return m;
}

Model load_model(const std::string& name_or_file, const ModelOptions& options) {
  if (zoo().count(name_or_file) || transformer_zoo_config_or_null(name_or_file))
    return build_zoo_model(name_or_file, options);
  if (name_or_file.ends_with(".json")) {
    check_options(options, name_or_file);
    return load_hf_config(name_or_file, options);
  }
  const bool looks_like_file = name_or_file.find('/') != std::string::npos ||
                               name_or_file.ends_with(".yaml") || name_or_file.ends_with(".yml");
  std::error_code ec;  // a name too long for a path is simply not a file
  if (looks_like_file || std::filesystem::is_regular_file(name_or_file, ec)) {
    check_options(options, name_or_file);
    if (options.seq_len || options.flash_attention || options.mlm_predictions || options.tensor_parallel > 1 ||
        options.context_parallel > 1 || options.expert_parallel > 1)
      throw InputError(fmt::format("{}: --seq-len, --flash-attention, --mlm-predictions, --tp, --cp and --ep apply to "
                                   "transformers, not YAML models",
                                   name_or_file));
    return load_model_yaml(name_or_file, options);
  }
  return build_zoo_model(name_or_file, options);  // throws the unknown-name error
}

}  // namespace dtsim::models
