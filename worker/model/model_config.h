// The shape of a transformer language model (GPT, BERT or Llama) and the range
// of its layers one pipeline stage holds. Every dimension is a parameter;
// nothing is built here, see stage.h.
//
//   ModelConfig config;  // GPT, float32
//   config.num_layers = 8;
//   config.hidden_size = 128;
//   config.ffn_size = 512;
//   config.num_heads = 4;
//   config.vocab_size = 256;
//   config.seq_length = 64;
//   RETURN_IF_ERROR(ValidateModelConfig(config));
//   RETURN_IF_ERROR(ValidateLayerRange(config, LayerRange{0, 4}));
#ifndef CHIMERA_WORKER_MODEL_MODEL_CONFIG_H_
#define CHIMERA_WORKER_MODEL_MODEL_CONFIG_H_

#include <c10/core/ScalarType.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace chimera::worker {

enum class ModelFamily {
  // Decoder with causal self-attention, trained on next-token prediction.
  kGpt,
  // Encoder with bidirectional self-attention, trained on masked tokens.
  kBert,
  // Decoder as GPT, in Llama's form: rotary positions, RMSNorm, SwiGLU MLP,
  // grouped-query attention, no biases.
  kLlama,
  // A user's own decoder as TorchScript pieces (scripted_modules.h),
  // trained on next-token prediction. Its blocks' insides are the user's:
  // of the sizes below, the pieces must have num_layers, hidden_size,
  // vocab_size and work on seq_length tokens; the others only describe
  // their cost to the planner (as a GPT block's).
  kTorchscript,
};

absl::string_view ModelFamilyName(ModelFamily family);

// True for the decoders (GPT, Llama, TorchScript): next-token loss.
bool IsDecoder(ModelFamily family);

// Llama 3.1's rope scaling (Hugging Face's rope_type "llama3"), which lowers
// the slowest rotary frequencies to stretch the context: frequencies whose
// wavelength exceeds original_context / low_frequency_factor are divided by
// `factor`, those shorter than original_context / high_frequency_factor are
// kept, and those between are interpolated. A factor of 1 changes nothing.
struct RopeScaling {
  double factor = 1;
  double low_frequency_factor = 1;
  double high_frequency_factor = 4;
  double original_context = 8192;
};

struct ModelConfig {
  ModelFamily family = ModelFamily::kGpt;
  // Transformer blocks; the embedding and the head are not counted.
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  // Width of the MLP inside a block (4 × hidden_size in GPT-2 and BERT).
  int64_t ffn_size = 0;
  // Must divide hidden_size.
  int64_t num_heads = 0;
  // Llama: key/value heads, dividing num_heads (each serves num_heads /
  // num_kv_heads query heads). The other families use num_heads.
  int64_t num_kv_heads = 0;
  // Llama: base of the rotary embedding's frequencies.
  double rope_theta = 10000;
  RopeScaling rope_scaling;
  // GPT and Llama: the head projects onto the vocabulary with the token
  // embedding's weight and no bias (GPT-2, Llama 3.2's small models) instead
  // of a weight of its own.
  bool tie_embeddings = false;
  // BERT reserves the last id, vocab_size - 1, as its [MASK] token.
  int64_t vocab_size = 0;
  // Longest input sequence (tokens the model sees; a GPT sample holds one
  // more, its last target).
  int64_t seq_length = 0;
  // float32, float64, or bfloat16 (GPU only, not checked here).
  c10::ScalarType dtype = c10::ScalarType::Float;
};

// Tokens one training sample holds: seq_length, and for a decoder one more,
// the last position's next-token target.
int64_t SampleLength(const ModelConfig& config);

// OK when every dimension is positive, num_heads divides hidden_size, BERT
// has room for its [MASK] id (vocab_size >= 2), Llama's num_kv_heads divides
// num_heads, its head size is even (rotary pairs), rope_theta > 0 and its
// rope scaling well formed (factor >= 1, 0 < low < high frequency factor,
// original_context > 0), only GPT and Llama tie their embeddings, and dtype is
// one of the supported types; otherwise INVALID_ARGUMENT naming the field and
// its value.
absl::Status ValidateModelConfig(const ModelConfig& config);

// The transformer blocks [begin, end) of one pipeline stage. The stage with
// begin == 0 also owns the embedding; the one with end == num_layers owns the
// final norm, the output head and the loss.
struct LayerRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// OK when 0 <= begin < end <= config.num_layers.
absl::Status ValidateLayerRange(const ModelConfig& config, LayerRange range);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_MODEL_CONFIG_H_
