// stage_efficiency: how fast one pipeline stage of transformer blocks runs
// its forward and backward, and the FLOP/s that makes. scripts/gpu-check runs
// it at bf16 on GPT-2-like shapes and divides by the GPU's peak; on a CPU it
// runs at any dtype, which is how its own test runs it.
//
//   stage_efficiency --device cuda:0 --dtype bfloat16 --hidden 1600,2048
//       --seq 1024 --micro-batches 1,2,4,8 [--layers 4] [--repetitions 5]
//
// One line per hidden size and micro-batch size:
//   hidden 1600 seq 1024 micro-batch 4 layers 4 bfloat16: forward+backward
//   41.2 ms, 512.3 TFLOP/s
// FLOPs are the planner's analytic count (planner/analytic_profile.h), the
// time the best of the repetitions after one warm-up.
// Exit codes: 0 measured; 1 LibTorch failed (out of memory, ...); 2 bad flags
// or a device this LibTorch cannot use.
#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "planner/analytic_profile.h"
#include "worker/comm/torch_error.h"
#include "worker/model/model_config.h"
#include "worker/model/transformer_stage.h"
#include "worker/runtime/device_memory.h"
#include "worker/tools/tool_cli.h"

namespace chimera::worker {
namespace {

// Head dimension of the GPT-2 family: heads = hidden / 64.
constexpr int64_t kHeadSize = 64;
// Bounds that keep a typo from asking for a stage no machine holds.
constexpr int64_t kMaxSize = 1 << 20;

struct Shape {
  int64_t hidden = 0;
  int64_t seq = 0;
  int64_t micro_batch = 0;
  int64_t layers = 0;
};

struct Flags {
  MeasuringFlags common{.device = "cuda:0", .dtype = "bfloat16"};
  std::vector<int64_t> hidden = {1600, 2048};
  int64_t seq = 1024;
  std::vector<int64_t> micro_batches = {1, 2, 4, 8};
  int64_t layers = 4;
};

// The blocks of a middle stage: no embedding, no head.
ModelConfig StageModel(const Shape& shape, c10::ScalarType dtype) {
  ModelConfig config;
  config.num_layers = shape.layers + 2;
  config.hidden_size = shape.hidden;
  config.ffn_size = 4 * shape.hidden;
  config.num_heads = std::max<int64_t>(1, shape.hidden / kHeadSize);
  config.seq_length = shape.seq;
  config.vocab_size = 2;
  config.dtype = dtype;
  return config;
}

double Milliseconds(std::chrono::steady_clock::duration elapsed) {
  return std::chrono::duration<double, std::milli>(elapsed).count();
}

// Best forward+backward time of the stage over `repetitions`, after a
// warm-up that loads the kernels and grows the allocator.
absl::StatusOr<double> BestMilliseconds(const Shape& shape,
                                        c10::ScalarType dtype,
                                        c10::Device device, int repetitions) {
  const ModelConfig config = StageModel(shape, dtype);
  ASSIGN_OR_RETURN(
      std::shared_ptr<TransformerStage> stage,
      BuildTransformerStage(config, {1, 1 + shape.layers}, /*seed=*/1, device));
  const at::TensorOptions options = at::TensorOptions(dtype).device(device);
  const at::Tensor inputs =
      at::randn({shape.micro_batch, shape.seq, shape.hidden}, options)
          .requires_grad_();
  double best = 0;
  for (int i = 0; i <= repetitions; ++i) {
    SynchronizeDevice(device);
    const auto start = std::chrono::steady_clock::now();
    const at::Tensor outputs = stage->Forward(inputs);
    outputs.backward(at::ones_like(outputs));
    SynchronizeDevice(device);
    const double ms = Milliseconds(std::chrono::steady_clock::now() - start);
    if (i > 0 && (best == 0 || ms < best)) best = ms;
  }
  return best;
}

absl::Status Measure(const Flags& flags) {
  ASSIGN_OR_RETURN(const at::TensorOptions options,
                   MeasuringOptions(flags.common));
  const c10::ScalarType dtype = options.dtype().toScalarType();
  const c10::Device device = options.device();
  for (const int64_t hidden : flags.hidden) {
    for (const int64_t micro_batch : flags.micro_batches) {
      const Shape shape{hidden, flags.seq, micro_batch, flags.layers};
      absl::StatusOr<double> ms;
      try {
        ms = BestMilliseconds(shape, dtype, device, flags.common.repetitions);
      } catch (const std::exception& e) {
        ms = absl::InternalError(TorchErrorMessage(e));
      }
      if (!ms.ok()) {
        return absl::Status(
            ms.status().code(),
            absl::StrCat("hidden ", hidden, " micro-batch ", micro_batch, ": ",
                         ms.status().message()));
      }
      // Forward plus a backward of twice its FLOPs.
      const double flops =
          3 * planner::BlockForwardFlops(shape.seq, hidden, 4 * hidden) *
          micro_batch * shape.layers;
      std::printf(
          "hidden %lld seq %lld micro-batch %lld layers %lld %s: "
          "forward+backward %.2f ms, %.4g TFLOP/s\n",
          static_cast<long long>(hidden), static_cast<long long>(shape.seq),
          static_cast<long long>(micro_batch),
          static_cast<long long>(shape.layers), flags.common.dtype.c_str(), *ms,
          flops / (*ms * 1e-3) / 1e12);
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace chimera::worker

int main(int argc, char** argv) {
  using chimera::worker::kMaxSize;
  chimera::worker::Flags flags;
  CLI::App app(
      "stage_efficiency: forward+backward time and FLOP/s of one "
      "pipeline stage of transformer blocks",
      "stage_efficiency");
  chimera::worker::AddMeasuringFlags(app, flags.common);
  app.add_option("--hidden", flags.hidden, "Hidden sizes (heads = hidden / 64)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, kMaxSize));
  app.add_option("--seq", flags.seq, "Sequence length")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, kMaxSize));
  app.add_option("--micro-batches", flags.micro_batches, "Micro-batch sizes")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, kMaxSize));
  app.add_option("--layers", flags.layers, "Transformer blocks in the stage")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  return chimera::worker::ParseAndMeasure(
      app, argc, argv, [&] { return chimera::worker::Measure(flags); });
}
