#include "worker/runtime/task_spec.h"

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/field_errors.h"
#include "common/host_cores.h"
#include "common/root_path.h"
#include "common/safetensors.h"
#include "common/status_macros.h"
#include "schedule/params_proto.h"
#include "schedule/program.h"
#include "worker/runtime/cpu_priority.h"

namespace chimera::worker {
namespace {

constexpr int64_t kDefaultVocabSize = 256;
constexpr double kDefaultBeta1 = 0.9;
constexpr double kDefaultBeta2 = 0.999;
constexpr double kDefaultEps = 1e-8;

void ReadTraining(const chimera::v1::TrainingSpec& spec, TaskSpec& task) {
  task.seed = spec.seed();
  task.max_steps = spec.max_steps();
  task.optimizer = OptimizerConfigFor(spec.optimizer());
}

// The micro-batch size and the partition of `plan`, whose schedule has
// `model_stages` model stages.
void ReadPlan(const chimera::v1::Plan& plan, int model_stages, TaskSpec& task,
              FieldErrors& errors) {
  task.micro_batch_size = plan.micro_batch_size();
  if (task.micro_batch_size < 1) {
    errors.Add("plan.microBatchSize",
               absl::StrCat(plan.micro_batch_size(), " must be >= 1"));
  }
  // With replicated stages the programs name slices of micro-batches.
  if (!plan.replication().empty()) {
    const absl::StatusOr<std::vector<int>> replication =
        schedule::ParseReplication(plan.replication());
    if (!replication.ok()) {
      errors.Add("plan.replication", replication.status().message());
    } else if (absl::StatusOr<int> slice =
                   schedule::SliceSize(task.micro_batch_size, *replication);
               !slice.ok()) {
      errors.Add("plan.microBatchSize", slice.status().message());
    } else {
      task.micro_batch_size = *slice;
    }
  }
  std::vector<LayerRange> stages;
  for (const auto& stage : plan.partition()) {
    stages.push_back(
        {stage.first_layer(), stage.first_layer() + stage.num_layers()});
  }
  if (static_cast<int>(stages.size()) != model_stages) {
    errors.Add("plan", absl::StrCat("partition has ", stages.size(),
                                    " stages; the schedule has ", model_stages,
                                    " model stages"));
    return;
  }
  absl::StatusOr<Partition> partition =
      Partition::Of(std::move(stages), task.model.num_layers);
  if (partition.ok()) {
    task.partition = *std::move(partition);
  } else {
    errors.Add("plan", partition.status().message());
  }
}

// The data file and the job's checkpoint directory under the worker's
// roots: only there, whatever the job asks (a client may submit jobs; it may
// not read or write the worker's other files, nor learn where the roots
// are, so the data file keeps the job's name for it in messages).
void ReadPaths(const chimera::v1::JobSpec& spec, const WorkerRoots& roots,
               absl::string_view job_id, TaskSpec& task, FieldErrors& errors) {
  if (task.data.format != DataFormat::kSynthetic) {
    // Checked here to name the field among the job's other problems; the
    // file is opened beneath the root when the task starts (DataSource), so
    // a link swapped in meanwhile leads nowhere either.
    const absl::StatusOr<std::string> path =
        ResolveUnderRoot(roots.data, spec.data().path());
    if (path.ok()) {
      task.data.root = roots.data;
      task.data.path = spec.data().path();
      task.data.name = spec.data().path();
    } else {
      errors.Add("spec.data.path", path.status().message());
    }
  }
  if (!spec.model().init_from().empty()) {
    const std::string weights =
        absl::StrCat(spec.model().init_from(), "/", kSafetensorsModelFile);
    if (const absl::Status beneath =
            ResolveUnderRoot(roots.data, weights).status();
        beneath.ok()) {
      task.init_from = FileUnderRoot{.root = roots.data, .path = weights};
    } else {
      errors.Add("spec.model.initFrom", beneath.message());
    }
  }
  if (!spec.model().modules().empty()) {
    // Checked here and opened beneath the root when the task starts, as the
    // data file is.
    if (const absl::Status beneath =
            ResolveUnderRoot(roots.data, spec.model().modules()).status();
        beneath.ok()) {
      task.modules =
          FileUnderRoot{.root = roots.data, .path = spec.model().modules()};
    } else {
      errors.Add("spec.model.modules", beneath.message());
    }
  }
  const chimera::v1::TrainingSpec& training = spec.training();
  if (training.checkpoint_every() <= 0) return;
  // Only its text is checked here: the directory is opened beneath the root
  // when the task starts, where no link can lead it out (CheckpointDir).
  const std::string directory =
      absl::StrCat(training.checkpoint_dir(), "/", job_id);
  if (const absl::Status relative = CheckRootRelative(directory);
      !relative.ok()) {
    errors.Add("spec.training.checkpointDir", relative.message());
    return;
  }
  task.checkpoints = {.every = training.checkpoint_every(),
                      .root = roots.checkpoints,
                      .dir = directory};
}

// Where the stages compute: `gpu_index`'s GPU for a gpu job, which this
// build must be able to run.
c10::Device ReadDevice(const chimera::v1::ResourceSpec& resources,
                       int gpu_index, FieldErrors& errors) {
  if (resources.device() != "gpu") return c10::Device(c10::DeviceType::CPU);
  if (!kWorkerHasGpuRuntime) {
    errors.Add("spec.resources.device",
               "gpu tasks need a worker built against a LibTorch with CUDA "
               "and with NCCL; this one runs on the CPU only (use cpu)");
  }
  return c10::Device(c10::DeviceType::CUDA,
                     static_cast<c10::DeviceIndex>(gpu_index));
}

// The data's format and sample shape, once the model and the seed are read
// (and before ReadPaths, which resolves only a file's path).
void ReadData(const chimera::v1::DataSpec& spec, TaskSpec& task,
              FieldErrors& errors) {
  const absl::StatusOr<DataFormat> format = ParseDataFormat(spec.format());
  if (format.ok()) {
    task.data.format = *format;
  } else {
    errors.Add("spec.data.format", format.status().message());
  }
  task.data.token_bytes = spec.token_bytes() > 0 ? spec.token_bytes() : 2;
  task.data.vocab_size = task.model.vocab_size;
  task.data.sample_length = SampleLength(task.model);
  task.data.seed = task.seed;
}

}  // namespace

absl::StatusOr<WorkerRoots> WorkerRootsFrom(absl::string_view data_root,
                                            absl::string_view checkpoint_root) {
  WorkerRoots roots;
  FieldErrors errors;
  for (auto [flag, given, root] :
       {std::make_tuple("--data-root", data_root, &roots.data),
        std::make_tuple("--checkpoint-root", checkpoint_root,
                        &roots.checkpoints)}) {
    absl::StatusOr<std::string> canonical =
        CanonicalRoot(given.empty() ? "." : given);
    if (canonical.ok()) {
      *root = *std::move(canonical);
    } else {
      errors.Add(flag, canonical.status().message());
    }
  }
  if (!errors.empty()) return errors.ToStatus();
  return roots;
}

int ThreadsPerWorker(const chimera::v1::ResourceSpec& resources,
                     int workers_on_host) {
  const int cores = HostCores();
  if (resources.threads_per_worker() == 0) {
    return std::max(1, cores / std::max(1, workers_on_host));
  }
  return std::clamp(resources.threads_per_worker(), 1, cores);
}

std::vector<int> RanksSharingHost(const chimera::v1::Plan& plan, int rank,
                                  int world) {
  const auto& placement = plan.placement();
  const auto own = std::find_if(
      placement.begin(), placement.end(),
      [rank](const chimera::v1::Placement& p) { return p.rank() == rank; });
  std::vector<int> ranks;
  if (own == placement.end()) {
    for (int r = 0; r < world; ++r) ranks.push_back(r);
    return ranks;
  }
  for (const chimera::v1::Placement& p : placement) {
    if (p.node() == own->node()) ranks.push_back(p.rank());
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

int WorkersSharingHost(const chimera::v1::Plan& plan, int rank, int world) {
  return static_cast<int>(RanksSharingHost(plan, rank, world).size());
}

int NiceIncrementOf(const chimera::v1::Plan& plan, int rank, int world,
                    int threads, int cores) {
  const auto& bubbles = plan.prediction().rank_bubble_ratios();
  const std::vector<int> ranks = RanksSharingHost(plan, rank, world);
  std::vector<double> busy;
  for (const int r : ranks) {
    if (r < 0 || r >= bubbles.size()) return 0;
    busy.push_back(1 - bubbles[r]);
  }
  const std::vector<int> increments = NiceIncrements(busy, threads, cores);
  const auto own = std::find(ranks.begin(), ranks.end(), rank);
  return own == ranks.end() ? 0 : increments[own - ranks.begin()];
}

absl::StatusOr<TaskSpec> TaskSpecFor(const chimera::v1::TrainJob& job,
                                     const chimera::v1::Plan& plan, int rank,
                                     absl::string_view job_id,
                                     const TaskSite& site) {
  const chimera::v1::JobSpec& spec = job.spec();
  FieldErrors errors;
  const absl::StatusOr<schedule::ScheduleParams> params =
      schedule::ScheduleParamsOf(plan);
  if (!params.ok()) {
    errors.Add("", params.status().message());
    return errors.ToStatus();
  }
  TaskSpec task;
  task.model = ModelConfigFor(spec.model());
  ReadTraining(spec.training(), task);
  ReadPlan(plan, schedule::ModelStageCount(*params), task, errors);
  task.sharding = params->sharding;
  ReadData(spec.data(), task, errors);
  ReadPaths(spec, site.roots, job_id, task, errors);
  task.device = ReadDevice(spec.resources(), site.gpu_index, errors);
  const int world = schedule::WorkerCount(*params);
  task.threads =
      ThreadsPerWorker(spec.resources(), WorkersSharingHost(plan, rank, world));
  // A GPU rank's work is its device's: its threads only feed it.
  task.nice_increment = task.gpu() ? 0
                                   : NiceIncrementOf(plan, rank, world,
                                                     task.threads, HostCores());
  task.timeouts = Timeouts::Every(site.timeout);
  if (!errors.empty()) return errors.ToStatus();
  return task;
}

absl::StatusOr<Directory> OpenModules(
    const std::optional<FileUnderRoot>& modules) {
  if (!modules) {
    return absl::InvalidArgumentError(
        "a torchscript model needs the directory of its pieces (modules)");
  }
  ASSIGN_OR_RETURN(const Directory root, Directory::OpenRoot(modules->root));
  return root.Open(modules->path, /*create=*/false);
}

ModelConfig ModelConfigFor(const chimera::v1::ModelSpec& spec) {
  ModelConfig model;
  if (spec.family() == "bert") {
    model.family = ModelFamily::kBert;
  } else if (spec.family() == "llama") {
    model.family = ModelFamily::kLlama;
  } else if (spec.family() == "torchscript") {
    model.family = ModelFamily::kTorchscript;
  } else {
    model.family = ModelFamily::kGpt;
  }
  model.num_layers = spec.num_layers();
  model.hidden_size = spec.hidden_size();
  model.num_heads = spec.num_heads();
  model.num_kv_heads =
      spec.num_kv_heads() > 0 ? spec.num_kv_heads() : spec.num_heads();
  if (spec.rope_theta() > 0) model.rope_theta = spec.rope_theta();
  model.tie_embeddings = spec.tie_embeddings();
  if (spec.has_rope_scaling()) {
    const chimera::v1::RopeScaling& scaling = spec.rope_scaling();
    model.rope_scaling.factor = scaling.factor();
    if (scaling.low_freq_factor() > 0) {
      model.rope_scaling.low_frequency_factor = scaling.low_freq_factor();
    }
    if (scaling.high_freq_factor() > 0) {
      model.rope_scaling.high_frequency_factor = scaling.high_freq_factor();
    }
    if (scaling.original_max_position_embeddings() > 0) {
      model.rope_scaling.original_context =
          scaling.original_max_position_embeddings();
    }
  }
  model.ffn_size =
      spec.ffn_size() > 0 ? spec.ffn_size() : 4 * spec.hidden_size();
  model.vocab_size =
      spec.vocab_size() > 0 ? spec.vocab_size() : kDefaultVocabSize;
  model.seq_length = spec.seq_length();
  if (spec.dtype() == "float64") {
    model.dtype = c10::ScalarType::Double;
  } else if (spec.dtype() == "bfloat16") {
    // Job validation allows it on GPU jobs only.
    model.dtype = c10::ScalarType::BFloat16;
  } else {
    model.dtype = c10::ScalarType::Float;
  }
  return model;
}

OptimizerConfig OptimizerConfigFor(const chimera::v1::OptimizerSpec& spec) {
  OptimizerConfig config;
  config.kind =
      spec.name() == "adamw" ? OptimizerKind::kAdamW : OptimizerKind::kSgd;
  config.lr = spec.lr();
  config.momentum = spec.momentum();
  config.weight_decay = spec.weight_decay();
  config.beta1 = spec.beta1() > 0 ? spec.beta1() : kDefaultBeta1;
  config.beta2 = spec.beta2() > 0 ? spec.beta2() : kDefaultBeta2;
  config.eps = spec.eps() > 0 ? spec.eps() : kDefaultEps;
  return config;
}

}  // namespace chimera::worker
