#include "tests/integration/worker/pipeline_job.h"

#include <ATen/Parallel.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tests/integration/worker/training_record.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/runtime/gradient_sync.h"

namespace chimera::worker::testing {
namespace {

absl::Status CheckMetrics(const StepMetrics& metrics,
                          const ProgramExecutor& executor,
                          size_t instructions) {
  std::string problem;
  if (metrics.has_loss != executor.holds_last_stage()) {
    problem = "has_loss disagrees with holding the last stage";
  } else if (!(metrics.step_seconds > 0) || metrics.busy_seconds < 0 ||
             metrics.bubble_seconds < 0 ||
             metrics.busy_seconds > metrics.step_seconds) {
    problem = "step, busy and bubble times do not add up";
  } else if (metrics.op_seconds.size() != instructions) {
    problem = "not one time per instruction";
  } else if (metrics.memory_peak_bytes < metrics.memory_current_bytes ||
             metrics.memory_current_bytes <= 0) {
    problem = "memory peak below current usage";
  } else if (metrics.peak_stashed_slices < 1) {
    problem = "nothing was ever stashed";
  } else if (metrics.has_loss != (metrics.samples > 0)) {
    problem = "samples counted without a loss, or a loss without samples";
  }
  if (problem.empty()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("step ", metrics.step, " metrics: ", problem));
}

}  // namespace

std::string RankRecordPath(const std::string& dir, int rank) {
  return absl::StrCat(dir, "/rank-", rank, ".bin");
}

absl::Status RunPipelineRank(const PipelineJob& job,
                             const std::string& record_path, int rank,
                             TcpRendezvous& rendezvous) {
  at::set_num_threads(1);
  GlooOptions gloo;
  gloo.rank = rank;
  gloo.world_size = static_cast<int>(job.schedule.workers.size());
  gloo.groups = GradientGroups(job.schedule);
  gloo.timeout = job.connect_timeout;
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   CreateGlooCommunicator(rendezvous, gloo));
  ASSIGN_OR_RETURN(std::unique_ptr<DataSource> data,
                   DataSource::Open(job.data));
  ASSIGN_OR_RETURN(std::unique_ptr<ProgramExecutor> executor,
                   ProgramExecutor::Create(job.schedule, rank, job.executor,
                                           *data, comm.get()));
  const size_t instructions = job.schedule.workers[rank].instructions.size();
  std::vector<double> losses;
  for (int step = 0; step < job.steps; ++step) {
    ASSIGN_OR_RETURN(StepMetrics metrics, executor->RunStep(step));
    RETURN_IF_ERROR(CheckMetrics(metrics, *executor, instructions));
    losses.push_back(metrics.loss);
  }
  return WriteTrainingRecord(record_path, executor->NamedParameters(), losses);
}

}  // namespace chimera::worker::testing
