#include "worker/runtime/task_runner.h"

#include <fcntl.h>

#include <cmath>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/directory.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/host_staged_communicator.h"
#include "worker/comm/shared_memory.h"
#include "worker/comm/tcp_rendezvous.h"
#ifdef CHIMERA_HAVE_NCCL
#include "worker/comm/nccl_communicator.h"
#endif
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/checkpoint_writer.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/cpu_priority.h"
#include "worker/runtime/data_source.h"
#include "worker/runtime/device_memory.h"
#include "worker/runtime/gradient_sync.h"
#include "worker/runtime/host_memory.h"
#include "worker/runtime/message_tags.h"
#include "worker/runtime/op_position.h"
#include "worker/runtime/program_executor.h"
#include "worker/weights/hugging_face_layout.h"
#include "worker/weights/safetensors_file.h"

namespace chimera::worker {
namespace {

// The Hugging Face tensors of the safetensors file `weights`, opened beneath
// its root.
absl::StatusOr<std::map<std::string, at::Tensor>> ReadWeights(
    const FileUnderRoot& weights) {
  ASSIGN_OR_RETURN(const Directory root, Directory::OpenRoot(weights.root));
  ASSIGN_OR_RETURN(const UniqueFd fd, root.OpenFile(weights.path, O_RDONLY));
  return ReadSafetensorsFile(fd.get(), weights.path);
}

// Overwrites every parameter of the stages `executor` holds with the
// Hugging Face tensors of the safetensors file `weights` (spec.model.
// initFrom), before the first step. Errors name the field and the file.
absl::Status StartFromWeights(ProgramExecutor& executor,
                              const FileUnderRoot& weights) {
  const auto failed = [&](const absl::Status& status) {
    return absl::Status(
        status.code(), absl::StrCat("spec.model.initFrom: ", weights.path, ": ",
                                    status.message()));
  };
  const absl::StatusOr<std::map<std::string, at::Tensor>> tensors =
      ReadWeights(weights);
  if (!tensors.ok()) return failed(tensors.status());
  for (const int model_stage : executor.model_stages()) {
    // Before the first step the optimizers hold no moments yet.
    StageState state;
    ASSIGN_OR_RETURN(state.parameters, executor.StageParameters(model_stage));
    for (auto& [name, parameter] : state.parameters) {
      parameter = parameter.clone();
    }
    state.optimizer.first_moments.resize(state.parameters.size());
    state.optimizer.second_moments.resize(state.parameters.size());
    if (const absl::Status copied = CopyFromHuggingFace(
            executor.spec().model, *tensors, state.parameters);
        !copied.ok()) {
      return failed(copied);
    }
    RETURN_IF_ERROR(executor.ImportStage(model_stage, state));
  }
  CHIMERA_LOG(INFO) << "starting from the weights of " << weights.path;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(
    const TaskRunOptions& options, const TcpRendezvous& rendezvous,
    std::vector<CommGroup> groups) {
  GlooOptions gloo;
  gloo.rank = options.schedule.rank();
  gloo.world_size = options.schedule.outline.world_size();
  gloo.groups = std::move(groups);
  gloo.host = options.host;
  gloo.timeout = options.spec.timeouts.rendezvous;
  return CreateGlooCommunicator(rendezvous, gloo);
}

// Gloo for CPU tasks; NCCL for GPU tasks, or Gloo staged through host memory
// where asked; each with the job's gradient groups and the caller's extra
// groups.
absl::StatusOr<std::unique_ptr<Communicator>> Connect(
    const TaskRunOptions& options, const TcpRendezvous& rendezvous) {
  std::vector<CommGroup> groups = GradientGroups(
      options.schedule.outline, options.spec.model.tie_embeddings);
  groups.insert(groups.end(), options.extra_groups.begin(),
                options.extra_groups.end());
  if (!options.spec.gpu())
    return ConnectGloo(options, rendezvous, std::move(groups));
  if (options.gpu_transport == GpuTransport::kHostStagedGloo) {
    ASSIGN_OR_RETURN(std::unique_ptr<Communicator> gloo,
                     ConnectGloo(options, rendezvous, std::move(groups)));
    return StageThroughHost(std::move(gloo));
  }
#ifdef CHIMERA_HAVE_NCCL
  NcclOptions nccl;
  nccl.rank = options.schedule.rank();
  nccl.world_size = options.schedule.outline.world_size();
  nccl.device = options.spec.device.index();
  nccl.groups = std::move(groups);
  nccl.links = P2pLinks(options.schedule.program);
  nccl.timeout = options.spec.timeouts.rendezvous;
  return CreateNcclCommunicator(rendezvous, nccl);
#else
  return absl::FailedPreconditionError(
      "a gpu task needs NCCL, and this worker was built without it");
#endif
}

// Where rank 0 publishes the first step and its claim of the checkpoints.
constexpr char kFirstStepKey[] = "chimera/first_step";

// What rank 0 decides before the others start: the step every rank starts
// from, and the token of its claim of the job's checkpoint directory (empty
// when the job takes no checkpoints).
struct StartPoint {
  int64_t first_step = 0;
  std::string claim;
};

std::string Encode(const StartPoint& start) {
  return absl::StrCat(start.first_step, " ", start.claim);
}

absl::StatusOr<StartPoint> Decode(absl::string_view text) {
  const std::vector<std::string> words =
      absl::StrSplit(text, ' ', absl::SkipEmpty());
  StartPoint start;
  if (words.empty() || words.size() > 2 ||
      !absl::SimpleAtoi(words[0], &start.first_step) ||
      start.first_step < 0) {
    return absl::InternalError(
        absl::StrCat("rank 0 published a malformed first step '", text, "'"));
  }
  if (words.size() == 2) start.claim = words[1];
  return start;
}

// The job's checkpoint directory: created by rank 0, found by the others.
absl::StatusOr<CheckpointDir> OpenCheckpoints(const TaskRunOptions& options,
                                              bool create) {
  ASSIGN_OR_RETURN(const Directory root,
                   Directory::OpenRoot(options.spec.checkpoints.root));
  absl::StatusOr<CheckpointDir> checkpoints = CheckpointDir::Open(
      root, options.spec.checkpoints.dir, options.attempt, create);
  if (checkpoints.ok()) return checkpoints;
  if (!create && absl::IsNotFound(checkpoints.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", options.schedule.rank(),
        " does not see the checkpoint directory '",
        options.spec.checkpoints.dir,
        "' that rank 0 created: every worker's --checkpoint-root must be the "
        "same shared file system for a job with "
        "spec.training.checkpointEvery"));
  }
  return absl::Status(checkpoints.status().code(),
                      absl::StrCat("spec.training.checkpointDir: ",
                                   checkpoints.status().message()));
}

// Rank 0, before any other rank starts: claims the job's checkpoints for
// this attempt, so that no task of an earlier one writes or prunes any
// more, and picks the first step from what is complete on disk.
absl::StatusOr<StartPoint> ChooseStart(const TaskRunOptions& options,
                                       const CheckpointDir& checkpoints) {
  StartPoint start;
  ASSIGN_OR_RETURN(start.claim, checkpoints.Claim());
  if (options.start_over) {
    RETURN_IF_ERROR(checkpoints.RemoveAllSteps());
    return start;
  }
  start.first_step =
      checkpoints.LatestComplete(options.spec.model.num_layers).value_or(0);
  if (start.first_step < options.recorded_checkpoint_step) {
    CHIMERA_LOG(WARNING)
        << "the coordinator saw the checkpoint of step "
        << options.recorded_checkpoint_step << " complete, but '"
        << checkpoints.path() << "' holds "
        << (start.first_step > 0
                ? absl::StrCat("none later than step ", start.first_step)
                : std::string("no complete checkpoint"))
        << ": its files were lost; resuming from step " << start.first_step;
  } else if (start.first_step > 0) {
    CHIMERA_LOG(INFO) << "resuming from step " << start.first_step
                      << ", the latest complete checkpoint in '"
                      << checkpoints.path() << "'";
  }
  return start;
}

// Rank 0's schedule digest: every other rank must run the same schedule.
constexpr char kDigestKey[] = "chimera/schedule_digest";

absl::Status CheckSameSchedule(const TaskRunOptions& options,
                               TcpRendezvous& rendezvous) {
  ASSIGN_OR_RETURN(const std::string rank0, rendezvous.Get(kDigestKey));
  const std::string& mine = options.schedule.outline.digest;
  if (rank0 == mine) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("rank ", options.schedule.rank(), " was sent schedule ",
                   mine, " and rank 0 schedule ", rank0,
                   ": the ranks were not started for one schedule"));
}

// Every rank's start point and, where the job takes checkpoints, its view of
// the checkpoint directory: rank 0 decides and publishes both in the store
// (before the observer hears of it), with its schedule's digest; the others
// read them and check that they run rank 0's schedule and see its claim.
struct Started {
  StartPoint start;
  std::optional<CheckpointDir> checkpoints;
  std::unique_ptr<TcpRendezvous> rendezvous;
};

absl::StatusOr<Started> Rendezvous(const TaskRunOptions& options,
                                   TaskObserver& observer) {
  Started started;
  const bool checkpointing = options.spec.checkpoints.every > 0;
  const int world = options.schedule.outline.world_size();
  if (options.schedule.rank() == 0) {
    if (checkpointing) {
      ASSIGN_OR_RETURN(started.checkpoints, OpenCheckpoints(options, true));
      ASSIGN_OR_RETURN(started.start,
                       ChooseStart(options, *started.checkpoints));
    }
    ASSIGN_OR_RETURN(
        started.rendezvous,
        TcpRendezvous::Host(options.host, options.store_port, world,
                            options.spec.timeouts.rendezvous));
    RETURN_IF_ERROR(
        started.rendezvous->Set(kDigestKey, options.schedule.outline.digest));
    RETURN_IF_ERROR(
        started.rendezvous->Set(kFirstStepKey, Encode(started.start)));
    observer.OnStoreReady(
        absl::StrCat(options.host, ":", started.rendezvous->port()),
        started.start.first_step);
    return started;
  }
  ASSIGN_OR_RETURN(started.rendezvous,
                   TcpRendezvous::Join(options.store_host, options.store_port,
                                       options.spec.timeouts.rendezvous));
  RETURN_IF_ERROR(CheckSameSchedule(options, *started.rendezvous));
  ASSIGN_OR_RETURN(const std::string published,
                   started.rendezvous->Get(kFirstStepKey));
  ASSIGN_OR_RETURN(started.start, Decode(published));
  if (checkpointing) {
    ASSIGN_OR_RETURN(started.checkpoints, OpenCheckpoints(options, false));
    RETURN_IF_ERROR(started.checkpoints->CheckClaim(started.start.claim));
  }
  return started;
}

// A rank's checkpoints during its steps: after every spec.checkpoints.every
// steps, its stages are written in the background as the step left them,
// while it trains on.
class StepCheckpoints {
 public:
  StepCheckpoints(const TaskRunOptions& options, const CheckpointDir* dir)
      : every_(options.spec.checkpoints.every),
        last_step_(options.last_step),
        written_(StagesWrittenBy(options.schedule.outline,
                                 options.schedule.rank(),
                                 options.spec.sharding)),
        writer_(dir, options.spec.model.num_layers, options.schedule.rank()) {}

  // After step `step`: starts its checkpoint when it is one, waits for the
  // last one to be written after the run's last step; the latest step whose
  // checkpoint share this rank has written. A failed write's error.
  absl::StatusOr<int64_t> After(ProgramExecutor& executor, int64_t step) {
    RETURN_IF_ERROR(writer_.Check());
    // After the optimizer step every replica of a stage is the same, so its
    // writer alone saves it (with sharding, each member its part). An
    // asynchronous pipeline drains first: the checkpoint holds every update
    // of the steps before it, and the run goes on from it as a resumed run
    // would.
    if ((step + 1) % every_ == 0) {
      RETURN_IF_ERROR(executor.DrainPipeline(step));
      ASSIGN_OR_RETURN(std::vector<StageView> stages,
                       StageViews(executor, written_));
      ASSIGN_OR_RETURN(const std::shared_future<void> read,
                       writer_.Submit(step + 1, std::move(stages)));
      executor.DeferUpdatesUntil(read);
    }
    // The last step reports the run's last checkpoint.
    if (step + 1 == last_step_) RETURN_IF_ERROR(writer_.Flush());
    return writer_.durable_step();
  }

  // No write outlives the run.
  absl::Status Finish() { return writer_.Flush(); }

 private:
  const int64_t every_;
  const int64_t last_step_;
  const std::vector<int> written_;
  CheckpointWriter writer_;
};

// Lowers this task's CPU priority by `increment` (cpu_priority.h), saying so;
// a task that cannot still runs, only slower where its host is contended.
void YieldCoresToBusierRanks(int increment) {
  if (increment <= 0) return;
  if (const absl::Status lowered = LowerCpuPriority(increment); !lowered.ok()) {
    CHIMERA_LOG(WARNING) << lowered.message();
    return;
  }
  CHIMERA_LOG(INFO) << "nice +" << increment
                    << ": this rank computes less than its host's busiest "
                       "rank of the job, whose cores its ranks outnumber";
}

}  // namespace

absl::Status RunTask(const TaskRunOptions& options, TaskObserver& observer) {
  const TaskSpec& spec = options.spec;
  LimitComputeThreads(spec.threads);
  RetainFreedHostMemory();
  YieldCoresToBusierRanks(spec.nice_increment);
  // Before the rendezvous: the other ranks need not wait to learn this.
  RETURN_IF_ERROR(CheckDeviceUsable(spec.device));
  ASSIGN_OR_RETURN(Started started, Rendezvous(options, observer));
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   Connect(options, *started.rendezvous));
  ASSIGN_OR_RETURN(std::unique_ptr<DataSource> data,
                   DataSource::Open(spec.data));

  std::optional<SharedMemorySegment> position_memory;
  std::optional<OpPositionBoard> position;
  if (!options.position_segment.empty()) {
    ASSIGN_OR_RETURN(position_memory,
                     SharedMemorySegment::Open(options.position_segment,
                                               OpPositionBoard::kBytes));
    position.emplace(position_memory->data());
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<ProgramExecutor> executor,
      ProgramExecutor::Create(options.schedule, spec, *data, comm.get()));
  if (position) executor->PublishPositionTo(&*position);
  const int64_t first_step = started.start.first_step;
  if (first_step > 0) {
    RETURN_IF_ERROR(started.checkpoints->Load(*executor, first_step));
  } else if (spec.init_from) {
    RETURN_IF_ERROR(StartFromWeights(*executor, *spec.init_from));
  }
  std::optional<StepCheckpoints> checkpoints;
  if (started.checkpoints) checkpoints.emplace(options, &*started.checkpoints);
  for (int64_t step = first_step; step < options.last_step; ++step) {
    ASSIGN_OR_RETURN(StepMetrics metrics, executor->RunStep(step));
    // Before its checkpoint: a diverged model is not worth keeping.
    if (metrics.has_loss && !std::isfinite(metrics.loss)) {
      return absl::OutOfRangeError(
          absl::StrCat("step ", step, ": the training loss is ", metrics.loss,
                       " on rank ", options.schedule.rank(),
                       " (it computes a last stage): training diverged; lower "
                       "spec.training.optimizer.lr or check the data"));
    }
    if (checkpoints) {
      ASSIGN_OR_RETURN(metrics.checkpoint_step,
                       checkpoints->After(*executor, step));
    }
    RETURN_IF_ERROR(observer.OnStep(metrics, *comm));
  }
  // An asynchronous schedule's last step leaves backwards and an update.
  RETURN_IF_ERROR(executor->DrainPipeline(options.last_step - 1));
  if (checkpoints) RETURN_IF_ERROR(checkpoints->Finish());
  return comm->Barrier(spec.timeouts.rendezvous);
}

}  // namespace chimera::worker
