#include "worker/model/micro_batch.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/model/deterministic_random.h"

namespace chimera::worker {
namespace {

absl::Status ValidateTokens(const ModelConfig& config, const at::Tensor& tokens,
                            int64_t extra_tokens) {
  if (!tokens.defined() || tokens.dim() != 2 ||
      tokens.scalar_type() != at::kLong || !tokens.device().is_cpu()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokens must be a 2-d int64 CPU tensor [batch, tokens]; got ",
        tokens.defined() ? tokens.toString() : "undefined", " of ",
        tokens.defined() ? tokens.dim() : 0, " dimensions"));
  }
  const int64_t seq = tokens.size(1) - extra_tokens;
  if (tokens.size(0) < 1 || seq < 1 || seq > config.seq_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens are [", tokens.size(0), ", ", tokens.size(1),
                     "]; ", ModelFamilyName(config.family),
                     " needs at least one sample of 1 to ", config.seq_length,
                     " tokens", extra_tokens ? " plus its last target" : ""));
  }
  const int64_t lowest = tokens.min().item<int64_t>();
  const int64_t highest = tokens.max().item<int64_t>();
  if (lowest < 0 || highest >= config.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", lowest < 0 ? lowest : highest,
                     " is outside [0, ", config.vocab_size, ")"));
  }
  return absl::OkStatus();
}

// At least one position of every sample, each with probability about
// kMaskedFraction, from the sample's key alone.
at::Tensor MaskedPositions(const SampleKey& key, int64_t batch, int64_t seq) {
  at::Tensor mask =
      at::zeros({batch, seq}, at::TensorOptions().dtype(at::kBool));
  auto masked = mask.accessor<bool, 2>();
  const uint64_t step_key = KeyOf(key.seed, static_cast<uint64_t>(key.step));
  for (int64_t i = 0; i < batch; ++i) {
    const uint64_t sample_key =
        KeyOf(step_key, static_cast<uint64_t>(key.first_sample + i));
    bool any = false;
    int64_t lowest_position = 0;
    double lowest_draw = 1.0;
    for (int64_t p = 0; p < seq; ++p) {
      const double draw = DeterministicUniform(sample_key, p);
      masked[i][p] = draw < kMaskedFraction;
      any = any || masked[i][p];
      if (draw < lowest_draw) {
        lowest_draw = draw;
        lowest_position = p;
      }
    }
    if (!any) masked[i][lowest_position] = true;
  }
  return mask;
}

}  // namespace

absl::StatusOr<MicroBatch> MakeMicroBatch(const ModelConfig& config,
                                          const at::Tensor& tokens,
                                          const SampleKey& key) {
  const bool decoder = IsDecoder(config.family);
  RETURN_IF_ERROR(ValidateTokens(config, tokens, decoder ? 1 : 0));
  MicroBatch batch;
  if (decoder) {
    const int64_t seq = tokens.size(1) - 1;
    batch.inputs = tokens.slice(/*dim=*/1, 0, seq).contiguous();
    batch.targets = tokens.slice(/*dim=*/1, 1, seq + 1).contiguous();
    batch.loss_mask =
        at::ones(batch.inputs.sizes(), at::TensorOptions().dtype(at::kBool));
    return batch;
  }
  batch.loss_mask = MaskedPositions(key, tokens.size(0), tokens.size(1));
  batch.inputs = tokens.masked_fill(batch.loss_mask, config.vocab_size - 1);
  batch.targets = tokens.contiguous();
  return batch;
}

MicroBatch OnDevice(const MicroBatch& batch, c10::Device device) {
  if (device.is_cpu()) return batch;
  return MicroBatch{batch.inputs.to(device), batch.targets.to(device),
                    batch.loss_mask.to(device)};
}

}  // namespace chimera::worker
