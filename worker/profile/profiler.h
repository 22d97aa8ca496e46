// `chimera-worker profile`: measures what each layer of a job's model costs
// on this worker's device (the CPU, or a GPU for a gpu job), for the planner
// (proto/chimera/v1/profile.proto, docs/planner.md). Builds the layers exactly
// as a stage does (the embedding, every transformer block, the head with its
// loss; a torchscript model's own pieces, loaded as its tasks load them) with
// the job's shapes and, at micro-batch sizes 1, 2, 4, ... up to a maximum,
// times one forward and one backward per layer (the median of a few runs after
// a warm-up). It also measures, with the tracking allocator (MemoryTracker):
//   activation bytes per sample: device memory the forward leaves allocated
//     while its autograd graph (and output) is alive, at the largest size;
//   output bytes per sample: the layer's output (the head's is its loss
//     scalar, as in the analytic profile);
//   parameter bytes: the layer's parameters.
//
//   ASSIGN_OR_RETURN(chimera::v1::ModelProfile profile, ProfileJob(job));
//   std::string json = ProfileToJson(profile);
#ifndef CHIMERA_WORKER_PROFILE_PROFILER_H_
#define CHIMERA_WORKER_PROFILE_PROFILER_H_

#include <c10/core/Device.h>

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/profile.pb.h"
#include "worker/model/model_config.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker {

struct ProfileOptions {
  // Timed micro-batch sizes: the powers of two up to this one (>= 1).
  int max_micro_batch_size = 8;
  // Timed runs per layer and size, after one untimed warm-up run (>= 1);
  // more, up to 50, while they take under 2 s in all (the layers are timed
  // in rounds, each layer at each size once per round; single-threaded on
  // a CPU, each round on the next core this process may use).
  int repetitions = 3;
  // LibTorch intra-op threads, as the job's workers run (>= 1).
  int threads = 1;
  // Where the layers run; a CUDA device must pass CheckDeviceUsable.
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  uint64_t seed = 0;
  // Whose step is timed per layer (valid, see ValidateOptimizerConfig).
  OptimizerConfig optimizer;
  // The profile's metadata.name.
  std::string name;
  // A torchscript model's pieces (spec.model.modules beneath the data
  // root), which are timed as the stages run them.
  std::optional<FileUnderRoot> modules;
};

// Profiles the model of `config`. INVALID_ARGUMENT naming the option or model
// field that is out of range; for a torchscript model, the errors of
// StageFactory::Scripted's loading.
absl::StatusOr<chimera::v1::ModelProfile> ProfileModel(
    const ModelConfig& config, const ProfileOptions& options);

// Profiles a validated job's model with its threads per worker and seed, at
// sizes up to spec.training.microBatchSize (8 when the job leaves it open),
// named "<job name>-profile": on the CPU, or for a gpu job on CUDA device
// `gpu_index`. A torchscript model's pieces are read beneath `data_root`
// (empty: the current directory).
absl::StatusOr<chimera::v1::ModelProfile> ProfileJob(
    const chimera::v1::TrainJob& job, int gpu_index,
    const std::string& data_root);

// The profile in protobuf's JSON mapping (lowerCamelCase names, 64-bit
// integers quoted), which the planner's YAML profile reader accepts.
std::string ProfileToJson(const chimera::v1::ModelProfile& profile);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_PROFILE_PROFILER_H_
