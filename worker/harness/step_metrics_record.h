// What a forked rank measured, step by step, for a parent that must not touch
// LibTorch (see forked_ranks.h): the rank writes its StepMetrics (a plain
// struct) to a text file, the parent reads them back. Tests and benchmarks
// that compare memory or timing across ranks use it.
//
//   // In the child (PipelineJob::metrics_dir does this for every rank):
//   RETURN_IF_ERROR(WriteStepMetrics(RankMetricsPath(dir, rank), steps));
//   // In the parent:
//   ASSIGN_OR_RETURN(std::vector<StepMetrics> steps,
//                    ReadStepMetrics(RankMetricsPath(dir, rank)));
#ifndef CHIMERA_WORKER_HARNESS_STEP_METRICS_RECORD_H_
#define CHIMERA_WORKER_HARNESS_STEP_METRICS_RECORD_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/runtime/step_metrics.h"

namespace chimera::worker::harness {

// "<dir>/rank-<rank>.metrics".
std::string RankMetricsPath(const std::string& dir, int rank);

absl::Status WriteStepMetrics(const std::string& path,
                              const std::vector<StepMetrics>& steps);

// NOT_FOUND when the file is missing; DATA_LOSS when a line is truncated.
absl::StatusOr<std::vector<StepMetrics>> ReadStepMetrics(
    const std::string& path);

}  // namespace chimera::worker::harness

#endif  // CHIMERA_WORKER_HARNESS_STEP_METRICS_RECORD_H_
