// What computing the head's loss in chunks of tokens saves: the peak memory
// (over the forward and the backward) and the time of the head's projection,
// loss and gradients, computed whole (LanguageModelLoss of the logits) and in
// chunks of the size a last stage uses (ProjectedLanguageModelLoss; a last
// stage chunks only micro-batches of at least as many tokens as the hidden
// size), with the losses both give. scripts/gpu-check runs it at bf16 on the
// GPU; on the CPU it runs one compute thread, as a worker does.
//
//   head_loss_benchmark [--device cpu] [--dtype float32] [--hidden 768]
//       [--micro-batches 1,4] [--repetitions 5]
//
// Rows: a GPT-2 head (vocabulary 50,257, 1,024 tokens a sample) of the given
// hidden size at each micro-batch size, then the peer BERT configuration's
// (hidden 768, vocabulary 30,522, 128 tokens, four samples). Memory is what
// tensors hold on the device (device_memory.h) above what the inputs hold;
// each time is the median of the repetitions after one warm-up.
// A benchmark: it prints a markdown table and never passes or fails on time.
// Exit codes: 0 measured; 1 LibTorch failed (out of memory, ...); 2 bad
// flags or a device this LibTorch cannot use.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/comm/torch_error.h"
#include "worker/model/loss.h"
#include "worker/model/micro_batch.h"
#include "worker/model/model_config.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/device_memory.h"
#include "worker/tools/tool_cli.h"

namespace chimera::worker {
namespace {

struct Flags {
  MeasuringFlags common;  // the CPU in float32
  int64_t hidden = 768;
  std::vector<int64_t> micro_batches = {1, 4};
};

struct Case {
  std::string name;
  ModelFamily family;
  int64_t hidden, vocab, tokens, samples;
};

std::vector<Case> Cases(const Flags& flags) {
  std::vector<Case> cases;
  for (const int64_t samples : flags.micro_batches) {
    cases.push_back(
        {"GPT-2", ModelFamily::kGpt, flags.hidden, 50257, 1024, samples});
  }
  cases.push_back({"BERT peer", ModelFamily::kBert, 768, 30522, 128, 4});
  return cases;
}

struct Measured {
  double peak_mib = 0;
  double milliseconds = 0;
  double loss = 0;
};

// The head's inputs and parameters, as a last stage holds them.
struct Head {
  at::Tensor normed, weight, bias;
  MicroBatch batch;
};

absl::StatusOr<Head> MakeHead(const Case& c, const at::TensorOptions& on) {
  ModelConfig config;
  config.family = c.family;
  config.num_layers = 1;
  config.hidden_size = c.hidden;
  config.num_heads = 1;
  config.vocab_size = c.vocab;
  config.seq_length = c.tokens;
  config.dtype = at::kFloat;
  const at::Tensor ids =
      at::randint(c.vocab, {c.samples, SampleLength(config)}, at::kLong);
  ASSIGN_OR_RETURN(MicroBatch batch, MakeMicroBatch(config, ids, SampleKey{}));
  return Head{at::randn({c.samples, c.tokens, c.hidden}, on).requires_grad_(),
              (at::randn({c.vocab, c.hidden}, on) * 0.02).requires_grad_(),
              at::zeros({c.vocab}, on).requires_grad_(), std::move(batch)};
}

using LossOf = std::function<absl::StatusOr<at::Tensor>(const Head&)>;

// The loss and every gradient of `head` through `loss_of`, timed and with
// the peak bytes it held.
absl::StatusOr<Measured> Run(const Head& head, c10::Device device,
                             int repetitions, const LossOf& loss_of) {
  DeviceMemory memory(device);
  std::vector<double> times;
  Measured measured;
  for (int i = 0; i <= repetitions; ++i) {
    SynchronizeDevice(device);
    memory.ResetPeak();
    const int64_t before = memory.current_bytes();
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(const at::Tensor loss, loss_of(head));
    torch::autograd::grad({loss}, {head.normed, head.weight, head.bias});
    SynchronizeDevice(device);
    const std::chrono::duration<double, std::milli> took =
        std::chrono::steady_clock::now() - start;
    measured.peak_mib = (memory.peak_bytes() - before) / double(1 << 20);
    measured.loss = loss.item<double>();
    if (i > 0) times.push_back(took.count());  // the first warms up
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2,
                   times.end());
  measured.milliseconds = times[times.size() / 2];
  return measured;
}

absl::Status PrintRows(const Case& c, const at::TensorOptions& on,
                       const Flags& flags) {
  ASSIGN_OR_RETURN(const Head head, MakeHead(c, on));
  const double normaliser = static_cast<double>(c.samples);
  ASSIGN_OR_RETURN(
      const Measured whole,
      Run(head, on.device(), flags.common.repetitions, [&](const Head& h) {
        return LanguageModelLoss(at::linear(h.normed, h.weight, h.bias),
                                 h.batch, normaliser);
      }));
  ASSIGN_OR_RETURN(
      const Measured chunked,
      Run(head, on.device(), flags.common.repetitions, [&](const Head& h) {
        return ProjectedLanguageModelLoss(
            h.normed, h.weight, h.bias, h.batch, normaliser,
            DefaultChunkTokens(c.vocab, on.device()));
      }));
  for (const auto& [path, m] :
       {std::pair{"whole", whole}, std::pair{"chunked", chunked}}) {
    std::printf(
        "| %s | %lld | %lld × %lld | %lld | %s | %.0f | %.1f | %.6f |\n",
        c.name.c_str(), static_cast<long long>(c.hidden),
        static_cast<long long>(c.samples), static_cast<long long>(c.tokens),
        static_cast<long long>(c.vocab), path, m.peak_mib, m.milliseconds,
        m.loss);
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status Measure(const Flags& flags) {
  ASSIGN_OR_RETURN(const at::TensorOptions on, MeasuringOptions(flags.common));
  if (on.device().is_cpu()) LimitComputeThreads(1);
  std::printf(
      "| head | hidden | samples × tokens | vocab | path | peak MiB | ms | "
      "loss |\n|---|---|---|---|---|---|---|---|\n");
  for (const Case& c : Cases(flags)) {
    absl::Status status;
    try {
      status = PrintRows(c, on, flags);
    } catch (const std::exception& e) {
      status = absl::InternalError(TorchErrorMessage(e));
    }
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat(c.name, " head, ", c.samples,
                                       " samples: ", status.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace chimera::worker

int main(int argc, char** argv) {
  chimera::worker::Flags flags;
  CLI::App app(
      "head_loss_benchmark: the head's loss computed whole and in chunks, "
      "peak memory and time",
      "head_loss_benchmark");
  chimera::worker::AddMeasuringFlags(app, flags.common);
  app.add_option("--hidden", flags.hidden, "Hidden size of the GPT-2 head")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  app.add_option("--micro-batches", flags.micro_batches,
                 "Samples of 1,024 tokens a GPT-2 row takes")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  return chimera::worker::ParseAndMeasure(
      app, argc, argv, [&] { return chimera::worker::Measure(flags); });
}
