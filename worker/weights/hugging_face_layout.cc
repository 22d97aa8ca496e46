#include "worker/weights/hugging_face_layout.h"

#include <ATen/ATen.h>

#include <map>
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

// GPT-2's Conv1D layers store their matrices as [in, out]: ours transposed.
absl::StatusOr<std::vector<HuggingFacePiece>> Gpt2BlockPieces(
    const ModelConfig& config, int64_t block, const std::string& parameter) {
  static const auto* const kNames = new std::map<std::string, std::string>{
      {"norm1_weight", "ln_1.weight"},
      {"norm1_bias", "ln_1.bias"},
      {"qkv_weight", "attn.c_attn.weight"},
      {"qkv_bias", "attn.c_attn.bias"},
      {"attention_out_weight", "attn.c_proj.weight"},
      {"attention_out_bias", "attn.c_proj.bias"},
      {"norm2_weight", "ln_2.weight"},
      {"norm2_bias", "ln_2.bias"},
      {"mlp_in_weight", "mlp.c_fc.weight"},
      {"mlp_in_bias", "mlp.c_fc.bias"},
      {"mlp_out_weight", "mlp.c_proj.weight"},
      {"mlp_out_bias", "mlp.c_proj.bias"},
  };
  const auto found = kNames->find(parameter);
  if (found == kNames->end()) {
    return absl::NotFoundError(
        absl::StrCat("a GPT block has no parameter '", parameter, "'"));
  }
  const int64_t rows =
      absl::StartsWith(parameter, "qkv")      ? 3 * config.hidden_size
      : absl::StartsWith(parameter, "mlp_in") ? config.ffn_size
                                              : config.hidden_size;
  return std::vector<HuggingFacePiece>{
      {absl::StrCat("transformer.h.", block, ".", found->second), rows,
       /*transposed=*/absl::EndsWith(parameter, "_weight") &&
           !absl::StartsWith(parameter, "norm")}};
}

// Llama's, and GPT's in GPT-2's layout. GPT-2's head is its token embedding
// with no bias, so only a tied GPT has it.
absl::Status RequireLayout(const ModelConfig& config) {
  if (config.family == ModelFamily::kLlama) return absl::OkStatus();
  if (config.family == ModelFamily::kGpt) {
    if (config.tie_embeddings) return absl::OkStatus();
    return absl::UnimplementedError(
        "a gpt model has Hugging Face's layout (GPT-2's) only with tied "
        "embeddings: GPT-2's head is its token embedding, with no bias "
        "(spec.model.tieEmbeddings: true; preset gpt2 sets it)");
  }
  return absl::UnimplementedError(
      absl::StrCat("the ", ModelFamilyName(config.family),
                   " family has no Hugging Face layout here"));
}

// The pieces of a parameter outside the blocks (embedding, head); nullopt
// for the blocks' and unknown names.
using WholeModelPieces = std::optional<std::vector<HuggingFacePiece>>;

WholeModelPieces Gpt2WholeModelPieces(const ModelConfig& config,
                                      const std::string& parameter) {
  if (parameter == "embedding.token_weight") {
    return std::vector<HuggingFacePiece>{
        {"transformer.wte.weight", config.vocab_size}};
  }
  if (parameter == "embedding.position_weight") {
    return std::vector<HuggingFacePiece>{
        {"transformer.wpe.weight", config.seq_length}};
  }
  if (parameter == "head.norm_weight" || parameter == "head.norm_bias") {
    return std::vector<HuggingFacePiece>{
        {absl::StrCat("transformer.ln_f.",
                      parameter == "head.norm_weight" ? "weight" : "bias"),
         config.hidden_size}};
  }
  return std::nullopt;
}

WholeModelPieces LlamaWholeModelPieces(const ModelConfig& config,
                                       const std::string& parameter) {
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
  return std::nullopt;
}

// The Hugging Face tensor `piece` of a parameter stands for: a view.
at::Tensor PieceOf(const at::Tensor& parameter, int64_t row,
                   const HuggingFacePiece& piece) {
  const at::Tensor rows = parameter.narrow(0, row, piece.rows);
  return piece.transposed ? rows.t() : rows;
}

nlohmann::json LlamaConfig(const ModelConfig& config) {
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
  return json;
}

// GPT2Config's fields. Our GELU is the exact one ("gelu"; GPT-2's own is
// the tanh approximation, "gelu_new"), and there is no dropout.
nlohmann::json Gpt2Config(const ModelConfig& config) {
  return {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"n_embd", config.hidden_size},
      {"n_inner", config.ffn_size},
      {"n_layer", config.num_layers},
      {"n_head", config.num_heads},
      {"n_positions", config.seq_length},
      {"n_ctx", config.seq_length},
      {"vocab_size", config.vocab_size},
      {"layer_norm_epsilon", kNormEpsilon},
      {"activation_function", "gelu"},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"scale_attn_weights", true},
      {"tie_word_embeddings", true},
  };
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
  RETURN_IF_ERROR(RequireLayout(config));
  nlohmann::json json = config.family == ModelFamily::kLlama
                            ? LlamaConfig(config)
                            : Gpt2Config(config);
  json["torch_dtype"] = TorchDtypeName(config.dtype);
  return json.dump(2) + "\n";
}

absl::StatusOr<std::vector<HuggingFacePiece>> HuggingFacePieces(
    const ModelConfig& config, const std::string& parameter) {
  RETURN_IF_ERROR(RequireLayout(config));
  const bool llama = config.family == ModelFamily::kLlama;
  WholeModelPieces whole = llama ? LlamaWholeModelPieces(config, parameter)
                                 : Gpt2WholeModelPieces(config, parameter);
  if (whole) return *std::move(whole);
  const auto block = BlockParameter(parameter);
  if (!block || block->first < 0 || block->first >= config.num_layers) {
    return absl::NotFoundError(
        absl::StrCat("the model has no parameter '", parameter, "'"));
  }
  return llama ? LlamaBlockPieces(config, block->first, block->second)
               : Gpt2BlockPieces(config, block->first, block->second);
}

absl::StatusOr<NamedTensors> ToHuggingFace(const ModelConfig& config,
                                           const NamedTensors& parameters) {
  NamedTensors tensors;
  for (const auto& [name, parameter] : parameters) {
    ASSIGN_OR_RETURN(const std::vector<HuggingFacePiece> pieces,
                     HuggingFacePieces(config, name));
    int64_t row = 0;
    for (const HuggingFacePiece& piece : pieces) {
      tensors.emplace_back(piece.name, PieceOf(parameter, row, piece).detach());
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
      at::Tensor target = PieceOf(parameter, row, piece);
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
