// Turns a micro-batch of token samples into what the first stage reads
// (inputs) and what the last stage's loss compares against (targets, and the
// positions that count).
//
// GPT (next-token prediction): a sample is seq + 1 tokens; inputs are its
// first seq tokens, targets the last seq (inputs shifted by one); every
// position counts.
//
// BERT (masked language model, simplified): a sample is seq tokens. Each
// position is masked with probability 15% (kMaskedFraction), deterministically
// from (seed, step, sample index in the mini-batch, position); a sample with no
// masked position gets its lowest-drawn position masked, so every sample has
// at least one. Masked inputs become the [MASK] id vocab_size - 1 (always, no
// 80/10/10 split); targets are the original tokens; only masked positions
// count. The mask depends on the sample's index in the mini-batch rather than
// on its micro-batch, so any split of a mini-batch into micro-batches masks
// the same positions and trains exactly like the whole mini-batch.
//
//   const SampleKey key{job_seed, step,
//                       /*first_sample=*/micro_batch * micro_batch_size};
//   ASSIGN_OR_RETURN(MicroBatch batch, MakeMicroBatch(config, tokens, key));
//   at::Tensor logits = last->Forward(first->Forward(batch.inputs));
#ifndef CHIMERA_WORKER_MODEL_MICRO_BATCH_H_
#define CHIMERA_WORKER_MODEL_MICRO_BATCH_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/model/model_config.h"

namespace chimera::worker {

inline constexpr double kMaskedFraction = 0.15;

// Which samples these are: BERT's mask is drawn from this key.
struct SampleKey {
  uint64_t seed = 0;
  int64_t step = 0;
  // Index of the micro-batch's first sample in the step's mini-batch.
  int64_t first_sample = 0;
};

struct MicroBatch {
  at::Tensor inputs;     // [batch, seq] int64: the first stage's input
  at::Tensor targets;    // [batch, seq] int64
  at::Tensor loss_mask;  // [batch, seq] bool: positions the loss counts
};

// `tokens` is [batch, seq + 1] (GPT) or [batch, seq] (BERT), int64, on the
// CPU, each id in [0, vocab_size), 1 <= seq <= config.seq_length. Returns
// INVALID_ARGUMENT naming the shape, type or id that breaks this. The result
// is on the CPU.
absl::StatusOr<MicroBatch> MakeMicroBatch(const ModelConfig& config,
                                          const at::Tensor& tokens,
                                          const SampleKey& key);

// The micro-batch's tensors on `device` (the same tensors on the CPU).
MicroBatch OnDevice(const MicroBatch& batch, c10::Device device);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_MICRO_BATCH_H_
