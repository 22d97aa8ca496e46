// Small float64 models and token batches shared by the worker's model tests.
#ifndef CHIMERA_TESTS_UNIT_WORKER_TEST_MODELS_H_
#define CHIMERA_TESTS_UNIT_WORKER_TEST_MODELS_H_

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>

#include "worker/model/model_config.h"

namespace chimera::worker::testing {

// Four blocks, float64: small enough to run in milliseconds, deep enough to
// split three ways. Llama's four query heads share two key/value heads.
inline ModelConfig TinyConfig(ModelFamily family) {
  ModelConfig config;
  config.family = family;
  config.num_layers = 4;
  config.hidden_size = 16;
  config.ffn_size = 40;
  config.num_heads = 4;
  if (family == ModelFamily::kLlama) config.num_kv_heads = 2;
  config.vocab_size = 29;
  config.seq_length = 12;
  config.dtype = at::kDouble;
  return config;
}

// `batch` samples of the length the family reads (decoders: seq + 1 tokens),
// random ids in [0, vocab_size - 1) from a fixed seed.
inline at::Tensor RandomTokens(const ModelConfig& config, int64_t batch,
                               uint64_t seed = 1) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  return at::randint(config.vocab_size - 1, {batch, SampleLength(config)}, generator,
                     at::TensorOptions().dtype(at::kLong));
}

}  // namespace chimera::worker::testing

#endif  // CHIMERA_TESTS_UNIT_WORKER_TEST_MODELS_H_
