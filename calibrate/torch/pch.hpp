// Precompiled header of the libtorch library: the libtorch headers its sources include (parsing them
// costs ~15 s of CPU per source file; precompiled once, every driver file then compiles in ~1 s).
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>
#include <torch/optim/sgd.h>
