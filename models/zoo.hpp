// The built-in model zoo and the one entry point that resolves a zoo name or a YAML file.
#pragma once
#include <string>
#include <vector>

#include "models/model.hpp"

namespace dtsim::models {

struct ModelOptions {
  int batch = 1;
  int input_h = 0, input_w = 0;  // 0 = the model's default (224, or 299 for Inception, 32 for LeNet-5)
  int channels = 0;              // 0 = default (3, or 1 for LeNet-5)
  int classes = 0;               // 0 = default (1000, or 10 for LeNet-5)
  // Transformers (language models): the model is built for (batch = micro-batch, seq_len) tokens.
  int seq_len = 0;               // 0 = the model's default (its training context); not for CNNs or ViT
  bool flash_attention = false;  // fused attention kernels (no s x s score matrix kept)
  // BERT pre-training: positions per sequence the masked-LM head runs over, gathered from the encoder's
  // output first (NVIDIA DeepLearningExamples' dense sequence output); 0 = every position (Hugging Face's
  // BertForPreTraining).
  int mlm_predictions = 0;
  // Transformers: the shard one rank of a parallel layout holds (Megatron-LM's layers; models/README.md
  // "Sharded models"): tensor parallelism splits heads, the MLP's intermediate size and the vocabulary;
  // context parallelism gives each rank seq_len / context_parallel tokens whose attention runs over the
  // whole sequence; expert parallelism places experts / expert_parallel experts on each rank. 1 = none.
  int tensor_parallel = 1;
  // Tensor parallelism with the embedding and the output layer whole on every rank (a trainer that
  // replicates them, as validate/pytorch/model_parallel.py does) instead of Megatron's vocab-parallel split.
  bool replicated_vocab = false;
  int context_parallel = 1;
  int expert_parallel = 1;
};

// Names of the zoo models: lenet5, alexnet, vgg16, resnet18, resnet34, resnet50, resnet101, resnet152,
// inception_v3, inception_v4, densenet121 (plus small validation nets such as resnet20).
std::vector<std::string> zoo_names();

// Names of the transformer zoo models (GPT-2, Megatron GPT, BERT, Llama 2/3, Mixtral, ViT); models/README.md.
std::vector<std::string> transformer_zoo_names();

// Builds a zoo model; throws InputError for an unknown name (listing the known ones) or bad options.
Model build_zoo_model(const std::string& name, const ModelOptions& options);

// A zoo name, a path to a YAML model file (docs/model-schema.md) or to a Hugging Face config.json
// (models/hf_config.hpp). Throws InputError.
Model load_model(const std::string& name_or_file, const ModelOptions& options);

}  // namespace dtsim::models
