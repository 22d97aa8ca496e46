#include "worker/profile/profiler.h"

#include <ATen/ATen.h>
#include <sched.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/directory.h"
#include "common/statistics.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "google/protobuf/util/json_util.h"
#include "planner/model_profile.h"
#include "worker/model/layers.h"
#include "worker/model/micro_batch.h"
#include "worker/model/scripted_modules.h"
#include "worker/model/split_backward.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/device_memory.h"
#include "worker/runtime/host_memory.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker {
namespace {

constexpr int kDefaultMaxMicroBatchSize = 8;
// See TimeLayers.
constexpr double kMinRoundsSeconds = 2.0;
constexpr int kMaxRounds = 50;

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
  // The backward's peak above what the forward kept.
  int64_t backward_extra_bytes = 0;
};

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

// The timed runs of one layer at one micro-batch size so far.
struct Runs {
  std::vector<double> forward, backward, backward_input, backward_weight;
  int64_t retained_bytes = 0;
  int64_t output_bytes = 0;
  int64_t backward_extra_bytes = 0;

  // Their medians.
  Measurement Summary() const {
    return {Median(forward),         Median(backward), Median(backward_input),
            Median(backward_weight), retained_bytes,   output_bytes,
            backward_extra_bytes};
  }
};

// Times one forward and backward of LAYER at SAMPLES samples, and the
// backward again in its two halves, into `runs` (none for a warm-up run). A
// GPU computes asynchronously: the device is drained before each clock
// reading.
absl::Status TimeOnce(const ProfiledLayer& layer, int64_t samples,
                      c10::Device device, DeviceMemory& memory, Runs* runs) {
  ASSIGN_OR_RETURN(const LayerInput input, layer.make_input(samples));
  SynchronizeDevice(device);
  const int64_t before = memory.current_bytes();
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(Pass pass, layer.forward(input));
  SynchronizeDevice(device);
  const auto forward_end = std::chrono::steady_clock::now();
  const int64_t retained = memory.current_bytes() - before;
  memory.ResetPeak();
  const auto backward_start = std::chrono::steady_clock::now();
  pass.end.backward(pass.gradient);
  SynchronizeDevice(device);
  const auto backward_end = std::chrono::steady_clock::now();
  const int64_t backward_extra = memory.peak_bytes() - (before + retained);
  ASSIGN_OR_RETURN(const auto halves,
                   MeasureSplitBackward(layer, input, device));
  if (runs == nullptr) return absl::OkStatus();
  runs->retained_bytes = retained;
  runs->output_bytes = static_cast<int64_t>(pass.end.nbytes());
  runs->backward_extra_bytes = std::max<int64_t>(0, backward_extra);
  runs->forward.push_back(SecondsBetween(start, forward_end));
  runs->backward.push_back(SecondsBetween(backward_start, backward_end));
  runs->backward_input.push_back(halves.first);
  runs->backward_weight.push_back(halves.second);
  return absl::OkStatus();
}

// Adds `weight` times `from`'s times to `to`'s.
void AddTimes(const Measurement& from, double weight, Measurement& to) {
  to.forward_seconds += weight * from.forward_seconds;
  to.backward_seconds += weight * from.backward_seconds;
  to.backward_input_seconds += weight * from.backward_input_seconds;
  to.backward_weight_seconds += weight * from.backward_weight_seconds;
}

// Per layer (outer) and size (inner), what one of its runs costs.
using LayerCosts = std::vector<std::vector<Measurement>>;

// The CPUs this process may run on, in order; empty where it cannot tell.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// Runs this process on `cpus` only (every allowed one when empty).
void RunOn(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  (void)::sched_setaffinity(0, sizeof(set), &set);
}

// The costs of every layer at every size, timed in rounds that each time
// every layer at every size once, after one warm-up round (first-touch
// allocations, caches): REPETITIONS rounds, or more, up to kMaxRounds, until
// they have taken kMinRoundsSeconds. A shared machine's speed drifts by tens
// of percent over seconds: rounds spread every layer's runs over the whole
// measurement, where layer after layer would each catch their own moment.
// Its cores need not be alike either (a VM's vCPUs whose physical cores
// others share more or less: on one 2-vCPU VM, one computed 1.5 times as
// fast as the other): a single-threaded CPU profile runs round r on the
// r-th allowed core in turn, and a cost is the mean over the cores it ran
// on of its median on each, as the ranks of a job spread over them.
absl::StatusOr<LayerCosts> TimeLayers(const std::vector<ProfiledLayer>& layers,
                                      const std::vector<int64_t>& sizes,
                                      const ProfileOptions& options,
                                      DeviceMemory& memory) {
  const std::vector<int> cpus = options.device.is_cpu() && options.threads == 1
                                    ? AllowedCpus()
                                    : std::vector<int>{};
  const int cores = std::max<int>(1, cpus.size());
  // Per core, layer and size.
  std::vector<std::vector<std::vector<Runs>>> runs(
      cores, std::vector<std::vector<Runs>>(layers.size(),
                                            std::vector<Runs>(sizes.size())));
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0;; ++round) {
    // Round 0 warms up; timed round t runs on core t - 1, in turn.
    const int core = round == 0 ? 0 : (round - 1) % cores;
    if (!cpus.empty()) RunOn({cpus[core]});
    for (size_t l = 0; l < layers.size(); ++l) {
      for (size_t s = 0; s < sizes.size(); ++s) {
        RETURN_IF_ERROR(TimeOnce(layers[l], sizes[s], options.device, memory,
                                 round == 0 ? nullptr : &runs[core][l][s]));
      }
    }
    const double elapsed =
        SecondsBetween(start, std::chrono::steady_clock::now());
    if (round >= options.repetitions &&
        (elapsed >= kMinRoundsSeconds || round >= kMaxRounds)) {
      break;
    }
  }
  if (!cpus.empty()) RunOn(cpus);
  LayerCosts costs(layers.size(), std::vector<Measurement>(sizes.size()));
  for (size_t l = 0; l < layers.size(); ++l) {
    for (size_t s = 0; s < sizes.size(); ++s) {
      Measurement& mean = costs[l][s];
      mean.retained_bytes = runs[0][l][s].retained_bytes;
      mean.output_bytes = runs[0][l][s].output_bytes;
      mean.backward_extra_bytes = runs[0][l][s].backward_extra_bytes;
      const int timed_cores = static_cast<int>(std::count_if(
          runs.begin(), runs.end(),
          [&](const auto& on_core) { return !on_core[l][s].forward.empty(); }));
      for (const auto& on_core : runs) {
        if (on_core[l][s].forward.empty()) continue;
        AddTimes(on_core[l][s].Summary(), 1.0 / timed_cores, mean);
      }
    }
  }
  return costs;
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
  std::shared_ptr<Block> block =
      MakeBlock(config, absl::StrCat("layer", index), seed);
  block->to(device);
  return {"block", block, HiddenStates(config, device),
          [block](const LayerInput& input) -> absl::StatusOr<Pass> {
            return WithGradient(block->Forward(input.tensor));
          }};
}

// Hidden states and a micro-batch's targets, as the head and the loss take
// them.
InputMaker HeadInputs(const ModelConfig& config, c10::Device device) {
  return [hidden = HiddenStates(config, device),
          batches = TokenBatches(config, device)](
             int64_t samples) -> absl::StatusOr<LayerInput> {
    ASSIGN_OR_RETURN(LayerInput input, hidden(samples));
    ASSIGN_OR_RETURN(input.batch, batches(samples));
    return input;
  };
}

ProfiledLayer HeadLayer(const ModelConfig& config, uint64_t seed,
                        c10::Device device) {
  auto head = std::make_shared<OutputHead>(config, "head", seed);
  head->to(device);
  return {"head", head, HeadInputs(config, device),
          [head](const LayerInput& input) -> absl::StatusOr<Pass> {
            ASSIGN_OR_RETURN(
                at::Tensor loss,
                head->Loss(input.tensor, input.batch,
                           static_cast<double>(input.tensor.size(0))));
            return Pass{std::move(loss), at::Tensor()};
          }};
}

std::vector<ProfiledLayer> FamilyLayers(const ModelConfig& config,
                                        uint64_t seed, c10::Device device) {
  std::vector<ProfiledLayer> layers;
  layers.push_back(EmbeddingLayer(config, seed, device));
  for (int64_t i = 0; i < config.num_layers; ++i) {
    layers.push_back(BlockLayer(config, i, seed, device));
  }
  layers.push_back(HeadLayer(config, seed, device));
  return layers;
}

// A TorchScript model's pieces as its stages run them: the embedding, each
// block, and the head with the scripted loss.
absl::StatusOr<std::vector<ProfiledLayer>> ScriptedLayers(
    const ModelConfig& config, const std::optional<FileUnderRoot>& modules,
    c10::Device device) {
  ASSIGN_OR_RETURN(const Directory directory, OpenModules(modules));
  ASSIGN_OR_RETURN(ScriptedModules model,
                   LoadScriptedModulesFor(directory, config));
  const auto on_device = [device](torch::jit::Module piece) {
    piece.to(device);
    return piece;
  };
  const auto piece_layer = [&](const char* kind, torch::jit::Module piece,
                               InputMaker make_input) {
    return ProfiledLayer{
        kind, ParameterMirror(piece), std::move(make_input),
        [piece = on_device(piece)](
            const LayerInput& input) mutable -> absl::StatusOr<Pass> {
          return WithGradient(piece.forward({input.tensor}).toTensor());
        }};
  };
  std::vector<ProfiledLayer> layers;
  layers.push_back(
      piece_layer("embedding", model.embedding,
                  [batches = TokenBatches(config, device)](
                      int64_t samples) -> absl::StatusOr<LayerInput> {
                    ASSIGN_OR_RETURN(MicroBatch tokens, batches(samples));
                    return LayerInput{tokens.inputs, {}};
                  }));
  for (const torch::jit::Module& block : model.blocks) {
    layers.push_back(piece_layer("block", block, HiddenStates(config, device)));
  }
  layers.push_back(ProfiledLayer{
      "head", ParameterMirror(model.head), HeadInputs(config, device),
      [head = on_device(model.head), loss = on_device(model.loss)](
          const LayerInput& input) mutable -> absl::StatusOr<Pass> {
        return Pass{MeanTokenLoss(loss, head.forward({input.tensor}).toTensor(),
                                  input.batch.targets,
                                  static_cast<double>(input.tensor.size(0))),
                    at::Tensor()};
      }});
  return layers;
}

absl::StatusOr<std::vector<ProfiledLayer>> BuildLayers(
    const ModelConfig& config, const ProfileOptions& options) {
  if (config.family != ModelFamily::kTorchscript) {
    return FamilyLayers(config, options.seed, options.device);
  }
  return ScriptedLayers(config, options.modules, options.device);
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
  DeviceMemory memory(options.device);
  LimitComputeThreads(options.threads);
  RetainFreedHostMemory();
  chimera::v1::ModelProfile profile;
  profile.set_api_version(kApiVersion);
  profile.set_kind(planner::kModelProfileKind);
  profile.mutable_metadata()->set_name(options.name);
  profile.set_source("measured");
  profile.set_device(options.device.str());
  ASSIGN_OR_RETURN(const std::vector<ProfiledLayer> layers,
                   BuildLayers(config, options));
  std::vector<int64_t> sizes;
  for (int64_t size = 1; size <= options.max_micro_batch_size; size *= 2) {
    sizes.push_back(size);
  }
  ASSIGN_OR_RETURN(const LayerCosts costs,
                   TimeLayers(layers, sizes, options, memory));
  for (size_t l = 0; l < layers.size(); ++l) {
    const ProfiledLayer& layer = layers[l];
    chimera::v1::LayerProfile* out = profile.add_layers();
    out->set_kind(layer.kind);
    int64_t parameter_bytes = 0;
    for (const at::Tensor& parameter : layer.module->parameters()) {
      parameter_bytes += static_cast<int64_t>(parameter.nbytes());
    }
    out->set_parameter_bytes(parameter_bytes);
    Measurement largest;
    for (size_t s = 0; s < sizes.size(); ++s) {
      largest = costs[l][s];
      chimera::v1::LayerTiming* timing = out->add_timings();
      timing->set_micro_batch_size(static_cast<int32_t>(sizes[s]));
      timing->set_forward_seconds(largest.forward_seconds);
      timing->set_backward_seconds(largest.backward_seconds);
      timing->set_backward_input_seconds(largest.backward_input_seconds);
      timing->set_backward_weight_seconds(largest.backward_weight_seconds);
    }
    const int64_t largest_size = sizes.back();
    out->set_optimizer_seconds(MeasureOptimizerStep(
        layer, options.optimizer, options.repetitions, options.device));
    out->set_activation_bytes_per_sample(largest.retained_bytes / largest_size);
    out->set_backward_extra_bytes_per_sample(largest.backward_extra_bytes /
                                             largest_size);
    out->set_output_bytes_per_sample(layer.kind == std::string("head")
                                         ? largest.output_bytes
                                         : largest.output_bytes / largest_size);
  }
  return profile;
}

absl::StatusOr<chimera::v1::ModelProfile> ProfileJob(
    const chimera::v1::TrainJob& job, int gpu_index,
    const std::string& data_root) {
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
  if (!job.spec().model().modules().empty()) {
    options.modules = FileUnderRoot{.root = data_root.empty() ? "." : data_root,
                                    .path = job.spec().model().modules()};
  }
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
