// What computing the head's loss in chunks of tokens saves: the peak CPU
// memory (the tracking allocator's, over the forward and the backward) and
// the time of the head's projection, loss and gradients, computed whole
// (LanguageModelLoss of the logits) and in chunks of the size a last stage
// uses (ProjectedLanguageModelLoss; a last stage chunks only micro-batches
// of at least as many tokens as the hidden size), with the losses both give.
//
//   head_loss_benchmark [--repetitions 5] [--threads 1]
//
// Rows: the GPT-2 small head (hidden 768, vocab 50,257) at 1,024 tokens per
// sample, one and four samples, and the peer BERT configuration's (vocab
// 30,522, 128 tokens, four samples); float32, one compute thread as a worker
// runs. Each time is the median of the repetitions after one warm-up.
// A benchmark: it prints a markdown table, never passes or fails on time,
// and exits 1 only when LibTorch fails.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

#include "worker/comm/torch_error.h"
#include "worker/model/loss.h"
#include "worker/model/micro_batch.h"
#include "worker/model/model_config.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/memory_tracker.h"

namespace chimera::worker {
namespace {

struct Case {
  const char* name;
  ModelFamily family;
  int64_t vocab, tokens, samples;
};

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

Head MakeHead(const Case& c) {
  ModelConfig config;
  config.family = c.family;
  config.num_layers = 1;
  config.hidden_size = 768;
  config.num_heads = 12;
  config.vocab_size = c.vocab;
  config.seq_length = c.tokens;
  config.dtype = at::kFloat;
  const at::Tensor ids =
      at::randint(c.vocab, {c.samples, SampleLength(config)}, at::kLong);
  Head head{at::randn({c.samples, c.tokens, 768}).requires_grad_(true),
            (at::randn({c.vocab, 768}) * 0.02).requires_grad_(true),
            at::zeros({c.vocab}).requires_grad_(true),
            MakeMicroBatch(config, ids, SampleKey{}).value()};
  return head;
}

// The loss and every gradient of `head` through `loss_of`, timed and with
// the peak bytes it held.
Measured Run(const Head& head, int repetitions,
             const std::function<at::Tensor(const Head&)>& loss_of) {
  MemoryTracker& memory = MemoryTracker::Install();
  std::vector<double> times;
  Measured measured;
  for (int i = 0; i <= repetitions; ++i) {
    memory.ResetPeak();
    const int64_t before = memory.current_bytes();
    const auto start = std::chrono::steady_clock::now();
    const at::Tensor loss = loss_of(head);
    torch::autograd::grad({loss}, {head.normed, head.weight, head.bias});
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

int Main(int argc, char** argv) {
  int repetitions = 5, threads = 1;
  CLI::App app(
      "The head's loss computed whole and in chunks: peak memory and time");
  app.add_option("--repetitions", repetitions, "Timed runs per row")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "Compute threads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  LimitComputeThreads(threads);
  MemoryTracker::Install();
  std::printf(
      "| head | samples × tokens | vocab | path | peak MiB | ms | loss |\n"
      "|---|---|---|---|---|---|---|\n");
  for (const Case& c : {Case{"GPT-2 small", ModelFamily::kGpt, 50257, 1024, 1},
                        Case{"GPT-2 small", ModelFamily::kGpt, 50257, 1024, 4},
                        Case{"BERT peer", ModelFamily::kBert, 30522, 128, 4}}) {
    const Head head = MakeHead(c);
    const double normaliser = static_cast<double>(c.samples);
    const Measured whole = Run(head, repetitions, [&](const Head& h) {
      return LanguageModelLoss(at::linear(h.normed, h.weight, h.bias), h.batch,
                               normaliser)
          .value();
    });
    const Measured chunked = Run(head, repetitions, [&](const Head& h) {
      return ProjectedLanguageModelLoss(h.normed, h.weight, h.bias, h.batch,
                                        normaliser, DefaultChunkTokens(c.vocab))
          .value();
    });
    for (const auto& [path, m] :
         {std::pair{"whole", whole}, std::pair{"chunked", chunked}}) {
      std::printf("| %s | %lld × %lld | %lld | %s | %.0f | %.0f | %.6f |\n",
                  c.name, static_cast<long long>(c.samples),
                  static_cast<long long>(c.tokens),
                  static_cast<long long>(c.vocab), path, m.peak_mib,
                  m.milliseconds, m.loss);
    }
  }
  return 0;
}

}  // namespace
}  // namespace chimera::worker

int main(int argc, char** argv) {
  try {
    return chimera::worker::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "head_loss_benchmark: %s\n",
                 chimera::worker::TorchErrorMessage(e).c_str());
    return 1;
  }
}
