// The analytic transformer profile: per-layer FLOPs, parameter and
// activation bytes computed from the model's dimensions (as in the
// breadth-first pipeline paper's appendix A), turned into times with a
// device's peak FLOP/s and an efficiency curve over the micro-batch size
// (MixPipe's FLOPS(B): small micro-batches use the device poorly).
//
//   chimera::v1::ModelProfile profile =
//       AnalyticProfile(job.spec().model(), cluster.spec().device());
//
// Per sample of S tokens, hidden size h, FFN size f, a heads, vocabulary V,
// d bytes per element (matching the worker's GPT and BERT layers):
//   block parameters   4h^2 + 2hf + 9h + f            (QKV, output, MLP, 2
//   norms) block forward      2S(4h^2 + 2hf) + 4S^2 h FLOPs  (matmuls +
//   attention) block activations  (34 S h + 5 a S^2) d/2 bytes    (Korthikanti
//   et al.) embedding          (V + S) h parameters, S h d bytes of output head
//   2h + V h + V parameters, 2 S h V forward FLOPs,
//                      2 S V d bytes of logits and their gradient
// Llama's layers (RMSNorm, SwiGLU, no biases; k_v key/value heads, so keys
// and values of width k = k_v h / a) instead:
//   block parameters   2h^2 + 2hk + 3hf + 2h
//   block forward      2S(2h^2 + 2hk + 3hf) + 4S^2 h FLOPs
//   block activations  (12 S h + 4 S f + a S^2) d bytes (what autograd keeps)
//   embedding          V h parameters (rotary positions have none)
//   head               h + V h parameters
//   backward           2x forward
//   time               FLOPs / (peak * efficiency(B * S))
//   efficiency(t)      max_efficiency * t / (t + half_efficiency_tokens)
#ifndef CHIMERA_PLANNER_ANALYTIC_PROFILE_H_
#define CHIMERA_PLANNER_ANALYTIC_PROFILE_H_

#include "chimera/v1/cluster.pb.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/profile.pb.h"

namespace chimera::planner {

struct EfficiencyCurve {
  // Fraction of peak FLOP/s reached by very large micro-batches.
  double max_efficiency = 0.5;
  // Tokens per micro-batch at which half of max_efficiency is reached.
  double half_efficiency_tokens = 512;

  double At(double tokens) const {
    return max_efficiency * tokens / (tokens + half_efficiency_tokens);
  }
};

// Largest micro-batch size the profile lists timings for; beyond it time
// scales linearly.
inline constexpr int kMaxProfiledMicroBatch = 1024;

// Forward FLOPs of one GPT or BERT block for one sample of `seq_length`
// tokens (the "block forward" line above); backward is twice that.
double BlockForwardFlops(double seq_length, double hidden_size,
                         double ffn_size);

// Model FLOPs of training on one sample: forward and backward (twice the
// forward) of every block and of the head, 3 (L (2S(4h^2 + 2hf) + 4S^2 h) +
// 2ShV), the embedding's lookups left out. The usual convention for model
// FLOPs utilisation (about 6 FLOPs per parameter and token, plus attention,
// the causal mask not discounted); recomputation is not counted.
double ModelFlopsPerSample(const chimera::v1::ModelSpec& model);

// Bytes of the first stage's gradients that its allreduce does not move
// when a step reads `tokens_per_step` tokens over all replicas: the workers
// sum a token embedding's gradient over the rows some replica used only
// (worker/runtime/gradient_sync.h), at most one per token, and add a
// used-rows mask of one element per row (so it is negative for a vocabulary
// that a step covers). Zero with tied embeddings: the head's part of the
// gradient is dense.
double UnsyncedEmbeddingBytes(const chimera::v1::ModelSpec& model,
                              double tokens_per_step);

// `model` must be valid (see jobspec::ValidateJob).
chimera::v1::ModelProfile AnalyticProfile(
    const chimera::v1::ModelSpec& model, const chimera::v1::DeviceSpec& device,
    const EfficiencyCurve& curve = {});

}  // namespace chimera::planner

#endif  // CHIMERA_PLANNER_ANALYTIC_PROFILE_H_
