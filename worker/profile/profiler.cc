#include "worker/profile/profiler.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "google/protobuf/util/json_util.h"
#include "planner/model_profile.h"
#include "worker/model/layers.h"
#include "worker/model/loss.h"
#include "worker/model/micro_batch.h"
#include "worker/model/split_backward.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/device_memory.h"
#include "worker/runtime/host_memory.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker {
namespace {

constexpr int kDefaultMaxMicroBatchSize = 8;

// What a layer's forward reads: its input and, for the head's loss, the
// micro-batch's targets (built untimed).
struct LayerInput {
  at::Tensor tensor;
  MicroBatch batch;
};

// What the forward leaves for the backward.
struct Pass {
  at::Tensor end;       // the output, or the head's loss
  at::Tensor gradient;  // for end.backward(); undefined for the loss
};

// One layer under measurement: its parameters, how to build an input of
// `samples` samples, and its forward.
struct ProfiledLayer {
  const char* kind;
  std::shared_ptr<torch::nn::Module> module;
  std::function<absl::StatusOr<LayerInput>(int64_t samples)> make_input;
  std::function<absl::StatusOr<Pass>(const LayerInput& input)> forward;
};

struct Measurement {
  double forward_seconds = 0;
  double backward_seconds = 0;
  // The same backward split: input gradient, then weights' gradients.
  double backward_input_seconds = 0;
  double backward_weight_seconds = 0;
  int64_t retained_bytes = 0;  // allocated by the forward, kept for backward
  int64_t output_bytes = 0;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double SecondsBetween(std::chrono::steady_clock::time_point start,
                      std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// Times the backward of another forward of LAYER split in its halves, as a
// zero-bubble schedule runs it: (input half, weight half) seconds.
absl::StatusOr<std::pair<double, double>> MeasureSplitBackward(
    const ProfiledLayer& layer, const LayerInput& input, c10::Device device) {
  ASSIGN_OR_RETURN(Pass pass, layer.forward(input));
  SynchronizeDevice(device);
  const auto start = std::chrono::steady_clock::now();
  SplitGradient split = ComputeInputGradient(pass.end, pass.gradient, input.tensor);
  SynchronizeDevice(device);
  const auto input_end = std::chrono::steady_clock::now();
  ComputeWeightGradients(std::move(split.weight_roots));
  SynchronizeDevice(device);
  const auto weight_end = std::chrono::steady_clock::now();
  return std::pair(SecondsBetween(start, input_end),
                   SecondsBetween(input_end, weight_end));
}

// Times one forward and backward of LAYER at SAMPLES samples, and the
// backward again in its two halves, the median of REPETITIONS runs after a
// warm-up. A GPU computes asynchronously: the device is drained before each
// clock reading.
absl::StatusOr<Measurement> Measure(const ProfiledLayer& layer, int64_t samples,
                                    int repetitions, c10::Device device,
                                    const DeviceMemory& memory) {
  std::vector<double> forward, backward, backward_input, backward_weight;
  Measurement measurement;
  for (int run = 0; run <= repetitions; ++run) {
    ASSIGN_OR_RETURN(const LayerInput input, layer.make_input(samples));
    SynchronizeDevice(device);
    const int64_t before = memory.current_bytes();
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(Pass pass, layer.forward(input));
    SynchronizeDevice(device);
    const auto forward_end = std::chrono::steady_clock::now();
    measurement.retained_bytes = memory.current_bytes() - before;
    measurement.output_bytes = static_cast<int64_t>(pass.end.nbytes());
    const auto backward_start = std::chrono::steady_clock::now();
    pass.end.backward(pass.gradient);
    SynchronizeDevice(device);
    const auto backward_end = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(const auto halves,
                     MeasureSplitBackward(layer, input, device));
    if (run == 0) continue;  // warm-up: first-touch allocations, caches
    forward.push_back(SecondsBetween(start, forward_end));
    backward.push_back(SecondsBetween(backward_start, backward_end));
    backward_input.push_back(halves.first);
    backward_weight.push_back(halves.second);
  }
  measurement.forward_seconds = Median(forward);
  measurement.backward_seconds = Median(backward);
  measurement.backward_input_seconds = Median(backward_input);
  measurement.backward_weight_seconds = Median(backward_weight);
  return measurement;
}

// Times one optimizer step over LAYER's parameters that a measured backward
// gave gradients: the median of REPETITIONS steps after one that creates
// the optimizer's state.
double MeasureOptimizerStep(const ProfiledLayer& layer,
                            const OptimizerConfig& config, int repetitions,
                            c10::Device device) {
  std::vector<at::Tensor> trained;
  for (const at::Tensor& parameter : layer.module->parameters()) {
    if (parameter.grad().defined()) trained.push_back(parameter);
  }
  Optimizer optimizer(config, std::move(trained));
  std::vector<double> seconds;
  for (int run = 0; run <= repetitions; ++run) {
    SynchronizeDevice(device);
    const auto start = std::chrono::steady_clock::now();
    optimizer.Step();
    SynchronizeDevice(device);
    if (run > 0) seconds.push_back(SecondsBetween(start, std::chrono::steady_clock::now()));
  }
  return Median(seconds);
}

// The gradient a following layer would send back: any tensor of the
// output's shape does (the cost does not depend on its values).
Pass WithGradient(at::Tensor output) {
  at::Tensor gradient = at::randn_like(output);
  return {std::move(output), std::move(gradient)};
}

using InputMaker = std::function<absl::StatusOr<LayerInput>(int64_t samples)>;

// Hidden states of a previous layer, as a block or the head takes them.
InputMaker HiddenStates(const ModelConfig& config, c10::Device device) {
  return [config, device](int64_t samples) -> absl::StatusOr<LayerInput> {
    return LayerInput{
        at::randn({samples, config.seq_length, config.hidden_size},
                  at::TensorOptions(config.dtype).device(device))
            .requires_grad_(true),
        {}};
  };
}

// A micro-batch of random tokens as the data source delivers them (GPT: one
// more token, the last target).
std::function<absl::StatusOr<MicroBatch>(int64_t samples)> TokenBatches(
    const ModelConfig& config, c10::Device device) {
  return [config, device](int64_t samples) -> absl::StatusOr<MicroBatch> {
    ASSIGN_OR_RETURN(
        const MicroBatch tokens,
        MakeMicroBatch(config,
                       at::randint(config.vocab_size - 1,
                                   {samples, SampleLength(config)},
                                   at::TensorOptions(at::kLong)),
                       SampleKey{}));
    return OnDevice(tokens, device);
  };
}

ProfiledLayer EmbeddingLayer(const ModelConfig& config, uint64_t seed,
                             c10::Device device) {
  auto embedding = std::make_shared<TokenEmbedding>(config, "embedding", seed);
  embedding->to(device);
  return {"embedding", embedding,
          [batches = TokenBatches(config, device)](
              int64_t samples) -> absl::StatusOr<LayerInput> {
            ASSIGN_OR_RETURN(MicroBatch tokens, batches(samples));
            return LayerInput{tokens.inputs, {}};
          },
          [embedding](const LayerInput& input) -> absl::StatusOr<Pass> {
            return WithGradient(embedding->Forward(input.tensor));
          }};
}

ProfiledLayer BlockLayer(const ModelConfig& config, int64_t index,
                         uint64_t seed, c10::Device device) {
  auto block = std::make_shared<TransformerBlock>(
      config, absl::StrCat("layer", index), seed);
  block->to(device);
  return {"block", block, HiddenStates(config, device),
          [block](const LayerInput& input) -> absl::StatusOr<Pass> {
            return WithGradient(block->Forward(input.tensor));
          }};
}

ProfiledLayer HeadLayer(const ModelConfig& config, uint64_t seed,
                        c10::Device device) {
  auto head = std::make_shared<OutputHead>(config, "head", seed);
  head->to(device);
  return {"head", head,
          [hidden = HiddenStates(config, device),
           batches = TokenBatches(config, device)](
              int64_t samples) -> absl::StatusOr<LayerInput> {
            ASSIGN_OR_RETURN(LayerInput input, hidden(samples));
            ASSIGN_OR_RETURN(input.batch, batches(samples));
            return input;
          },
          [head](const LayerInput& input) -> absl::StatusOr<Pass> {
            ASSIGN_OR_RETURN(
                at::Tensor loss,
                LanguageModelLoss(head->Forward(input.tensor), input.batch,
                                  static_cast<double>(input.tensor.size(0))));
            return Pass{std::move(loss), at::Tensor()};
          }};
}

std::vector<ProfiledLayer> BuildLayers(const ModelConfig& config,
                                       uint64_t seed, c10::Device device) {
  std::vector<ProfiledLayer> layers;
  layers.push_back(EmbeddingLayer(config, seed, device));
  for (int64_t i = 0; i < config.num_layers; ++i) {
    layers.push_back(BlockLayer(config, i, seed, device));
  }
  layers.push_back(HeadLayer(config, seed, device));
  return layers;
}

}  // namespace

absl::StatusOr<chimera::v1::ModelProfile> ProfileModel(
    const ModelConfig& config, const ProfileOptions& options) {
  RETURN_IF_ERROR(ValidateModelConfig(config));
  RETURN_IF_ERROR(ValidateOptimizerConfig(options.optimizer));
  if (options.max_micro_batch_size < 1 || options.repetitions < 1 ||
      options.threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profile options: max micro-batch size ", options.max_micro_batch_size,
        ", repetitions ", options.repetitions, " and threads ", options.threads,
        " must all be >= 1"));
  }
  RETURN_IF_ERROR(CheckDeviceUsable(options.device));
  const DeviceMemory memory(options.device);
  LimitComputeThreads(options.threads);
  RetainFreedHostMemory();
  chimera::v1::ModelProfile profile;
  profile.set_api_version(kApiVersion);
  profile.set_kind(planner::kModelProfileKind);
  profile.mutable_metadata()->set_name(options.name);
  profile.set_source("measured");
  profile.set_device(options.device.str());
  for (const ProfiledLayer& layer :
       BuildLayers(config, options.seed, options.device)) {
    chimera::v1::LayerProfile* out = profile.add_layers();
    out->set_kind(layer.kind);
    int64_t parameter_bytes = 0;
    for (const at::Tensor& parameter : layer.module->parameters()) {
      parameter_bytes += static_cast<int64_t>(parameter.nbytes());
    }
    out->set_parameter_bytes(parameter_bytes);
    Measurement largest;
    int64_t largest_size = 1;
    for (int64_t size = 1; size <= options.max_micro_batch_size; size *= 2) {
      ASSIGN_OR_RETURN(largest, Measure(layer, size, options.repetitions,
                                        options.device, memory));
      largest_size = size;
      chimera::v1::LayerTiming* timing = out->add_timings();
      timing->set_micro_batch_size(static_cast<int32_t>(size));
      timing->set_forward_seconds(largest.forward_seconds);
      timing->set_backward_seconds(largest.backward_seconds);
      timing->set_backward_input_seconds(largest.backward_input_seconds);
      timing->set_backward_weight_seconds(largest.backward_weight_seconds);
    }
    out->set_optimizer_seconds(MeasureOptimizerStep(
        layer, options.optimizer, options.repetitions, options.device));
    out->set_activation_bytes_per_sample(largest.retained_bytes / largest_size);
    out->set_output_bytes_per_sample(layer.kind == std::string("head")
                                         ? largest.output_bytes
                                         : largest.output_bytes / largest_size);
  }
  return profile;
}

absl::StatusOr<chimera::v1::ModelProfile> ProfileJob(
    const chimera::v1::TrainJob& job, int gpu_index) {
  const ModelConfig config = ModelConfigFor(job.spec().model());
  ProfileOptions options;
  const int micro_batch_size = job.spec().training().micro_batch_size();
  options.max_micro_batch_size =
      micro_batch_size > 0 ? micro_batch_size : kDefaultMaxMicroBatchSize;
  // A profile measures one worker alone on its host.
  options.threads =
      ThreadsPerWorker(job.spec().resources(), /*workers_on_host=*/1);
  options.seed = job.spec().training().seed();
  options.optimizer = OptimizerConfigFor(job.spec().training().optimizer());
  options.name = absl::StrCat(job.metadata().name(), "-profile");
  if (job.spec().resources().device() == "gpu") {
    options.device = c10::Device(c10::DeviceType::CUDA,
                                 static_cast<c10::DeviceIndex>(gpu_index));
  }
  return ProfileModel(config, options);
}

std::string ProfileToJson(const chimera::v1::ModelProfile& profile) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  std::string json;
  // Cannot fail: every field of a generated message prints.
  (void)google::protobuf::util::MessageToJsonString(profile, &json, options);
  return json;
}

}  // namespace chimera::worker
