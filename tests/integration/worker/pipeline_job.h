// One rank of a small training job inside a forked test process: joins the
// Gloo groups of the schedule, runs its program for a few steps with
// ProgramExecutor, checks each step's metrics are plausible and writes its
// parameters and losses as a TrainingRecord for the parent to compare.
//
//   RunForkedRanks(world, deadline, [&](int rank, TcpRendezvous& rendezvous) {
//     return RunPipelineRank(job, RankRecordPath(dir, rank), rank, rendezvous);
//   });
#ifndef CHIMERA_TESTS_INTEGRATION_WORKER_PIPELINE_JOB_H_
#define CHIMERA_TESTS_INTEGRATION_WORKER_PIPELINE_JOB_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/schedule/program.h"
#include "worker/comm/tcp_rendezvous.h"
#include "worker/runtime/data_source.h"
#include "worker/runtime/program_executor.h"

namespace chimera::worker::testing {

struct PipelineJob {
  schedule::Schedule schedule;
  ExecutorOptions executor;
  DataSourceOptions data;
  int steps = 1;
  // Joining the groups; executor.*_timeout bound the steps.
  absl::Duration connect_timeout = absl::Seconds(30);
};

// "<dir>/rank-<rank>.bin".
std::string RankRecordPath(const std::string& dir, int rank);

// Runs `rank` of `job` on one LibTorch thread. INTERNAL when a step's metrics
// are implausible (a loss on a rank without the last stage, negative bubble
// time, ...); otherwise the first error of joining, running or writing.
absl::Status RunPipelineRank(const PipelineJob& job,
                             const std::string& record_path, int rank,
                             TcpRendezvous& rendezvous);

}  // namespace chimera::worker::testing

#endif  // CHIMERA_TESTS_INTEGRATION_WORKER_PIPELINE_JOB_H_
