#include "worker/weights/hugging_face_layout.h"

#include <ATen/ATen.h>

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/model/layer_parts.h"

namespace chimera::worker {
namespace {

constexpr char kHuggingFaceHead[] = "lm_head.weight";

// "layer12.qkv_weight" -> {12, "qkv_weight"}; nullopt for other names.
std::optional<std::pair<int64_t, std::string>> BlockParameter(
    const std::string& name) {
  if (!absl::StartsWith(name, "layer")) return std::nullopt;
  const size_t dot = name.find('.');
  int64_t block = 0;
  if (dot == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(name).substr(5, dot - 5), &block)) {
    return std::nullopt;
  }
  return std::make_pair(block, name.substr(dot + 1));
}

absl::StatusOr<std::vector<HuggingFacePiece>> LlamaBlockPieces(
    const ModelConfig& config, int64_t block, const std::string& parameter) {
  const std::string prefix = absl::StrCat("model.layers.", block, ".");
  const int64_t hidden = config.hidden_size;
  const int64_t kv_width = hidden / config.num_heads * config.num_kv_heads;
  const int64_t ffn = config.ffn_size;
  if (parameter == "attention_norm_weight") {
    return std::vector<HuggingFacePiece>{
        {prefix + "input_layernorm.weight", hidden}};
  }
  if (parameter == "qkv_weight") {
    return std::vector<HuggingFacePiece>{
        {prefix + "self_attn.q_proj.weight", hidden},
        {prefix + "self_attn.k_proj.weight", kv_width},
        {prefix + "self_attn.v_proj.weight", kv_width}};
  }
  if (parameter == "attention_out_weight") {
    return std::vector<HuggingFacePiece>{
        {prefix + "self_attn.o_proj.weight", hidden}};
  }
  if (parameter == "mlp_norm_weight") {
    return std::vector<HuggingFacePiece>{
        {prefix + "post_attention_layernorm.weight", hidden}};
  }
  if (parameter == "gate_up_weight") {
    return std::vector<HuggingFacePiece>{{prefix + "mlp.gate_proj.weight", ffn},
                                         {prefix + "mlp.up_proj.weight", ffn}};
  }
  if (parameter == "down_weight") {
    return std::vector<HuggingFacePiece>{
        {prefix + "mlp.down_proj.weight", hidden}};
  }
  return absl::NotFoundError(
      absl::StrCat("a Llama block has no parameter '", parameter, "'"));
}

absl::Status RequireLlama(const ModelConfig& config) {
  if (config.family == ModelFamily::kLlama) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat("the ", ModelFamilyName(config.family),
                   " family has no Hugging Face layout here"));
}

std::string TorchDtypeName(c10::ScalarType type) {
  switch (type) {
    case at::kDouble:
      return "float64";
    case at::kBFloat16:
      return "bfloat16";
    default:
      return "float32";
  }
}

}  // namespace

absl::StatusOr<std::string> HuggingFaceConfig(const ModelConfig& config) {
  RETURN_IF_ERROR(RequireLlama(config));
  nlohmann::json json = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", config.hidden_size},
      {"intermediate_size", config.ffn_size},
      {"num_hidden_layers", config.num_layers},
      {"num_attention_heads", config.num_heads},
      {"num_key_value_heads", config.num_kv_heads},
      {"head_dim", config.hidden_size / config.num_heads},
      {"vocab_size", config.vocab_size},
      {"max_position_embeddings", config.seq_length},
      {"rms_norm_eps", kNormEpsilon},
      {"rope_theta", config.rope_theta},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"tie_word_embeddings", config.tie_embeddings},
      {"torch_dtype", TorchDtypeName(config.dtype)},
  };
  const RopeScaling& scaling = config.rope_scaling;
  if (scaling.factor != 1) {
    json["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", scaling.factor},
        {"low_freq_factor", scaling.low_frequency_factor},
        {"high_freq_factor", scaling.high_frequency_factor},
        {"original_max_position_embeddings",
         static_cast<int64_t>(scaling.original_context)},
    };
  }
  return json.dump(2) + "\n";
}

absl::StatusOr<std::vector<HuggingFacePiece>> HuggingFacePieces(
    const ModelConfig& config, const std::string& parameter) {
  RETURN_IF_ERROR(RequireLlama(config));
  if (parameter == "embedding.token_weight") {
    return std::vector<HuggingFacePiece>{
        {"model.embed_tokens.weight", config.vocab_size}};
  }
  if (parameter == "head.norm_weight") {
    return std::vector<HuggingFacePiece>{
        {"model.norm.weight", config.hidden_size}};
  }
  if (parameter == "head.output_weight") {
    return std::vector<HuggingFacePiece>{{kHuggingFaceHead, config.vocab_size}};
  }
  const auto block = BlockParameter(parameter);
  if (!block || block->first < 0 || block->first >= config.num_layers) {
    return absl::NotFoundError(
        absl::StrCat("the model has no parameter '", parameter, "'"));
  }
  return LlamaBlockPieces(config, block->first, block->second);
}

absl::StatusOr<NamedTensors> ToHuggingFace(const ModelConfig& config,
                                           const NamedTensors& parameters) {
  NamedTensors tensors;
  for (const auto& [name, parameter] : parameters) {
    ASSIGN_OR_RETURN(const std::vector<HuggingFacePiece> pieces,
                     HuggingFacePieces(config, name));
    int64_t row = 0;
    for (const HuggingFacePiece& piece : pieces) {
      tensors.emplace_back(piece.name,
                           parameter.narrow(0, row, piece.rows).detach());
      row += piece.rows;
    }
  }
  return tensors;
}

absl::Status CopyFromHuggingFace(
    const ModelConfig& config, const std::map<std::string, at::Tensor>& tensors,
    const NamedTensors& parameters) {
  at::NoGradGuard no_grad;
  for (const auto& [name, parameter] : parameters) {
    ASSIGN_OR_RETURN(const std::vector<HuggingFacePiece> pieces,
                     HuggingFacePieces(config, name));
    int64_t row = 0;
    for (const HuggingFacePiece& piece : pieces) {
      at::Tensor target = parameter.narrow(0, row, piece.rows);
      row += piece.rows;
      const auto found = tensors.find(piece.name);
      if (found == tensors.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("the weights have no tensor '", piece.name, "'",
                         piece.name == kHuggingFaceHead
                             ? " (weights whose head is their embedding's need "
                               "spec.model.tieEmbeddings: true)"
                             : ""));
      }
      if (found->second.sizes() != target.sizes()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor '", piece.name, "' is ", c10::str(found->second.sizes()),
            "; the model's is ", c10::str(target.sizes())));
      }
      target.copy_(found->second);
    }
  }
  return absl::OkStatus();
}

}  // namespace chimera::worker
