// Our parameters under Hugging Face's names, so that trained weights load
// into `transformers` (and its weights into a job). Llama's layout is that of
// LlamaForCausalLM; where we fuse two or three of its matrices into one
// parameter (q, k and v; gate and up: see llama_block.h), the parameter is
// theirs stacked along its first dimension, in that order:
//
//   embedding.token_weight         model.embed_tokens.weight
//   layer<i>.attention_norm_weight model.layers.<i>.input_layernorm.weight
//   layer<i>.qkv_weight model.layers.<i>.self_attn.{q,k,v}_proj.weight
//   layer<i>.attention_out_weight  model.layers.<i>.self_attn.o_proj.weight
//   layer<i>.mlp_norm_weight model.layers.<i>.post_attention_layernorm.weight
//   layer<i>.gate_up_weight        model.layers.<i>.mlp.{gate,up}_proj.weight
//   layer<i>.down_weight           model.layers.<i>.mlp.down_proj.weight
//   head.norm_weight               model.norm.weight
//   head.output_weight             lm_head.weight
//
// GPT's is GPT2LMHeadModel's, for a tied model only (GPT-2's head is its
// token embedding, with no bias). Its Conv1D layers keep their matrices
// [in, out], ours transposed; the biases and norms carry over as they are:
//
//   embedding.token_weight         transformer.wte.weight
//   embedding.position_weight      transformer.wpe.weight
//   layer<i>.norm1_{weight,bias}   transformer.h.<i>.ln_1.{weight,bias}
//   layer<i>.qkv_weight            transformer.h.<i>.attn.c_attn.weight (T)
//   layer<i>.attention_out_weight  transformer.h.<i>.attn.c_proj.weight (T)
//   layer<i>.norm2_{weight,bias}   transformer.h.<i>.ln_2.{weight,bias}
//   layer<i>.mlp_in_weight         transformer.h.<i>.mlp.c_fc.weight (T)
//   layer<i>.mlp_out_weight        transformer.h.<i>.mlp.c_proj.weight (T)
//   head.norm_{weight,bias}        transformer.ln_f.{weight,bias}
//
//   ASSIGN_OR_RETURN(auto tensors, ToHuggingFace(config, named_parameters));
//   RETURN_IF_ERROR(CopyFromHuggingFace(config, tensors, stage_parameters));
#ifndef CHIMERA_WORKER_WEIGHTS_HUGGING_FACE_LAYOUT_H_
#define CHIMERA_WORKER_WEIGHTS_HUGGING_FACE_LAYOUT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/model/model_config.h"

namespace chimera::worker {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// One Hugging Face tensor within a parameter: `rows` rows of its first
// dimension, after the pieces before it; transposed where Hugging Face keeps
// the matrix [in, out].
struct HuggingFacePiece {
  std::string name;
  int64_t rows = 0;
  bool transposed = false;
};

// The pieces `parameter` (one of our names) is made of, in order.
// UNIMPLEMENTED for a model without a Hugging Face layout here (BERT, an
// untied GPT); NOT_FOUND for a name the model has no parameter of.
absl::StatusOr<std::vector<HuggingFacePiece>> HuggingFacePieces(
    const ModelConfig& config, const std::string& parameter);

// `parameters` (ours, named as Stage names them) as Hugging Face's tensors,
// in the order given, fused ones split (views, not copies). Errors as
// HuggingFacePieces.
absl::StatusOr<NamedTensors> ToHuggingFace(const ModelConfig& config,
                                           const NamedTensors& parameters);

// The config.json `transformers` builds the model from (LlamaConfig's or
// GPT2Config's fields). UNIMPLEMENTED as HuggingFacePieces.
absl::StatusOr<std::string> HuggingFaceConfig(const ModelConfig& config);

// Copies the Hugging Face tensors `tensors` into each of `parameters` (ours,
// named as Stage names them; written in place), converted to its dtype and
// device. INVALID_ARGUMENT naming the tensor when one they need is missing
// or has another shape than the model's (both shapes are named); tensors of
// other stages are ignored.
absl::Status CopyFromHuggingFace(
    const ModelConfig& config, const std::map<std::string, at::Tensor>& tensors,
    const NamedTensors& parameters);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_WEIGHTS_HUGGING_FACE_LAYOUT_H_
