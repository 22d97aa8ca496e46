// What the split backward of the zero-bubble schedules costs against the
// fused one, per op, on the three kinds of stage of a BERT model (the first
// with the embedding, a middle one, the last with the head and the loss):
// FORWARD, the fused BACKWARD, BACKWARD_INPUT (B) and BACKWARD_WEIGHT (W) as
// the executor runs them (worker/model/split_backward.h), and, for
// comparison, the weights' gradients the simple way: autograd from the
// graph's end again, restricted to the parameters, which runs the input side
// a second time.
//
//   split_backward_benchmark [--layers 2] [--micro-batch 4]
//       [--repetitions 5] [--threads 1]
//
// Defaults: the peer BERT configuration (hidden 768, FFN 3072, 12 heads,
// vocab 30522, 128 tokens), float32 on the CPU, one compute thread as a
// worker runs, and freed host memory kept as a worker keeps it. Each time is
// the median of the repetitions after one warm-up.
// A benchmark: it prints a markdown table, never passes or fails on time,
// and exits 1 only when LibTorch fails.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "common/statistics.h"
#include "worker/comm/torch_error.h"
#include "worker/model/micro_batch.h"
#include "worker/model/model_config.h"
#include "worker/model/split_backward.h"
#include "worker/model/transformer_stage.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/host_memory.h"

namespace chimera::worker {
namespace {

struct Flags {
  int layers = 2;
  int micro_batch = 4;
  int repetitions = 5;
  int threads = 1;
};

// Three stages of `layers` blocks each.
ModelConfig PeerBert(int layers) {
  ModelConfig config;
  config.family = ModelFamily::kBert;
  config.num_layers = 3 * layers;
  config.hidden_size = 768;
  config.ffn_size = 3072;
  config.num_heads = 12;
  config.vocab_size = 30522;
  config.seq_length = 128;
  config.dtype = at::kFloat;
  return config;
}

// One forward's graph, ready for its backward.
struct Graph {
  at::Tensor input;
  at::Tensor end;
  at::Tensor end_gradient;  // undefined for the loss
};

// Seconds of each op, per repetition.
struct Samples {
  std::vector<double> forward, fused, input, weight, weight_retraversed;
};

double Seconds(const std::function<void()>& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

class StageBench {
 public:
  StageBench(const ModelConfig& config, LayerRange layers, const Flags& flags)
      : flags_(flags) {
    stage_ = BuildTransformerStage(config, layers, /*seed=*/1).value();
    const at::Tensor tokens = at::randint(
        config.vocab_size - 1, {flags.micro_batch, SampleLength(config)},
        at::TensorOptions().dtype(at::kLong));
    batch_ = MakeMicroBatch(config, tokens, {1, 0, 0}).value();
    activation_ =
        at::randn({flags.micro_batch, config.seq_length, config.hidden_size},
                  at::TensorOptions().dtype(config.dtype));
  }

  Samples Measure() {
    Samples samples;
    for (int i = 0; i <= flags_.repetitions; ++i) {
      // The first round warms up.
      const auto time = [&](std::vector<double>& into,
                            const std::function<void()>& run) {
        const double seconds = Seconds(run);
        if (i > 0) into.push_back(seconds);
      };
      Graph graph;
      time(samples.forward, [&] { graph = Forward(); });
      time(samples.fused, [&] { graph.end.backward(graph.end_gradient); });

      graph = Forward();
      SplitGradient split;
      time(samples.input, [&] {
        split =
            ComputeInputGradient(graph.end, graph.end_gradient, graph.input);
      });
      graph = {};
      time(samples.weight,
           [&] { ComputeWeightGradients(std::move(split.weight_roots)); });

      graph = Forward();
      const at::Tensor gradient = graph.end_gradient.defined()
                                      ? graph.end_gradient
                                      : at::ones_like(graph.end);
      if (graph.input.requires_grad()) {
        torch::autograd::grad({graph.end}, {graph.input}, {gradient},
                              /*retain_graph=*/true);
      }
      time(samples.weight_retraversed, [&] {
        torch::autograd::backward({graph.end}, {gradient},
                                  /*keep_graph=*/false,
                                  /*create_graph=*/false, stage_->parameters());
      });
    }
    return samples;
  }

 private:
  Graph Forward() {
    Graph graph;
    graph.input = stage_->is_first()
                      ? batch_.inputs
                      : activation_.detach().requires_grad_(true);
    if (stage_->is_last()) {
      graph.end = stage_
                      ->Loss(graph.input, batch_,
                             static_cast<double>(flags_.micro_batch))
                      .value();
    } else {
      graph.end = stage_->Forward(graph.input);
      graph.end_gradient = at::randn_like(graph.end);
    }
    return graph;
  }

  const Flags flags_;
  std::shared_ptr<TransformerStage> stage_;
  MicroBatch batch_;
  at::Tensor activation_;
};

void Run(const Flags& flags) {
  // As a worker process runs (task_runner.cc).
  LimitComputeThreads(flags.threads);
  RetainFreedHostMemory();
  const ModelConfig config = PeerBert(flags.layers);
  std::printf(
      "BERT hidden %lld, FFN %lld, %lld heads, vocab %lld, %lld tokens, "
      "micro-batch %d, %d blocks a stage, float32, %d thread(s); median of "
      "%d, seconds\n\n",
      static_cast<long long>(config.hidden_size),
      static_cast<long long>(config.ffn_size),
      static_cast<long long>(config.num_heads),
      static_cast<long long>(config.vocab_size),
      static_cast<long long>(config.seq_length), flags.micro_batch,
      flags.layers, flags.threads, flags.repetitions);
  std::printf(
      "| stage | F | BACKWARD | B | W | B+W | (B+W)/BACKWARD | W by "
      "re-traversal |\n|---|---|---|---|---|---|---|---|\n");
  const int64_t l = flags.layers;
  const struct {
    const char* name;
    LayerRange layers;
  } stages[] = {{"first (embedding)", {0, l}},
                {"middle", {l, 2 * l}},
                {"last (head, loss)", {2 * l, 3 * l}}};
  for (const auto& stage : stages) {
    const Samples s = StageBench(config, stage.layers, flags).Measure();
    const double input = Median(s.input);
    const double weight = Median(s.weight);
    std::printf("| %s | %.4f | %.4f | %.4f | %.4f | %.4f | %.3f | %.4f |\n",
                stage.name, Median(s.forward), Median(s.fused), input, weight,
                input + weight, (input + weight) / Median(s.fused),
                Median(s.weight_retraversed));
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace chimera::worker

int main(int argc, char** argv) {
  chimera::worker::Flags flags;
  CLI::App app(
      "split_backward_benchmark: F, fused BACKWARD, B and W seconds of the "
      "stages of a BERT model");
  app.add_option("--layers", flags.layers, "Transformer blocks a stage")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--micro-batch", flags.micro_batch, "Samples a micro-batch")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--repetitions", flags.repetitions,
                 "Timed runs after one warm-up")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--threads", flags.threads, "Compute threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);
  try {
    chimera::worker::Run(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "split_backward_benchmark: %s\n",
                 chimera::worker::TorchErrorMessage(e).c_str());
    return 1;
  }
  return 0;
}
