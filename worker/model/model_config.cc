#include "worker/model/model_config.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera::worker {
namespace {

absl::Status RequirePositive(absl::string_view field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("model.", field, " is ", value, "; it must be positive"));
}

absl::Status ValidateRopeScaling(const RopeScaling& scaling) {
  const auto invalid = [](absl::string_view field, double value,
                          absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.rope_scaling.", field, " is ", value, "; it must be ", rule));
  };
  if (!(scaling.factor >= 1) || !std::isfinite(scaling.factor)) {
    return invalid("factor", scaling.factor, ">= 1 and finite");
  }
  if (!(scaling.low_frequency_factor > 0)) {
    return invalid("low_frequency_factor", scaling.low_frequency_factor,
                   "positive");
  }
  if (!(scaling.high_frequency_factor > scaling.low_frequency_factor) ||
      !std::isfinite(scaling.high_frequency_factor)) {
    return invalid("high_frequency_factor", scaling.high_frequency_factor,
                   absl::StrCat("finite and above low_frequency_factor (",
                                scaling.low_frequency_factor, ")"));
  }
  if (!(scaling.original_context > 0) ||
      !std::isfinite(scaling.original_context)) {
    return invalid("original_context", scaling.original_context,
                   "positive and finite");
  }
  return absl::OkStatus();
}

absl::Status ValidateLlamaFields(const ModelConfig& config) {
  RETURN_IF_ERROR(RequirePositive("num_kv_heads", config.num_kv_heads));
  if (config.num_heads % config.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.num_kv_heads is ", config.num_kv_heads,
        "; it must divide model.num_heads (", config.num_heads, ")"));
  }
  if ((config.hidden_size / config.num_heads) % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.hidden_size / model.num_heads is ",
                     config.hidden_size / config.num_heads,
                     "; rotary embeddings rotate pairs, so it must be even"));
  }
  if (!(config.rope_theta > 0) || !std::isfinite(config.rope_theta)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.rope_theta is ", config.rope_theta,
                     "; it must be positive and finite"));
  }
  return ValidateRopeScaling(config.rope_scaling);
}

}  // namespace

absl::string_view ModelFamilyName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kGpt:
      return "gpt";
    case ModelFamily::kBert:
      return "bert";
    case ModelFamily::kLlama:
      return "llama";
    case ModelFamily::kTorchscript:
      return "torchscript";
  }
  return "unknown";
}

bool IsDecoder(ModelFamily family) { return family != ModelFamily::kBert; }

int64_t SampleLength(const ModelConfig& config) {
  return config.seq_length + (IsDecoder(config.family) ? 1 : 0);
}

absl::Status ValidateModelConfig(const ModelConfig& config) {
  for (const auto& [field, value] :
       {std::pair<absl::string_view, int64_t>{"num_layers", config.num_layers},
        {"hidden_size", config.hidden_size},
        {"ffn_size", config.ffn_size},
        {"num_heads", config.num_heads},
        {"vocab_size", config.vocab_size},
        {"seq_length", config.seq_length}}) {
    RETURN_IF_ERROR(RequirePositive(field, value));
  }
  if (config.hidden_size % config.num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.num_heads is ", config.num_heads,
        "; it must divide model.hidden_size (", config.hidden_size, ")"));
  }
  if (config.family == ModelFamily::kLlama) {
    RETURN_IF_ERROR(ValidateLlamaFields(config));
  } else if (config.tie_embeddings && config.family != ModelFamily::kGpt) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.tie_embeddings is set for a ", ModelFamilyName(config.family),
        " model; only gpt and llama tie their embeddings"));
  }
  if (config.family == ModelFamily::kBert && config.vocab_size < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.vocab_size is ", config.vocab_size,
                     "; BERT needs at least 2 (the last id is [MASK])"));
  }
  if (config.dtype != c10::ScalarType::Float &&
      config.dtype != c10::ScalarType::Double &&
      config.dtype != c10::ScalarType::BFloat16) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.dtype is ", c10::toString(config.dtype),
                     "; allowed: Float, Double, BFloat16"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLayerRange(const ModelConfig& config, LayerRange range) {
  if (range.begin < 0 || range.begin >= range.end ||
      range.end > config.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage layers [", range.begin, ", ", range.end,
        ") must be a non-empty range within [0, ", config.num_layers, ")"));
  }
  return absl::OkStatus();
}

}  // namespace chimera::worker
