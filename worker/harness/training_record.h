// What a forked rank of a training test reports to the parent: its
// parameters after training and its loss per step, in a small binary file.
// The child writes it from LibTorch tensors; the parent reads it with plain
// C++ (it must not touch LibTorch, see forked_ranks.h) and compares.
//
//   // In the child:
//   RETURN_IF_ERROR(WriteTrainingRecord(path, executor->NamedParameters(),
//                                       losses));
//   // In the parent:
//   ASSIGN_OR_RETURN(TrainingRecord record, ReadTrainingRecord(path));
#ifndef CHIMERA_WORKER_HARNESS_TRAINING_RECORD_H_
#define CHIMERA_WORKER_HARNESS_TRAINING_RECORD_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace chimera::worker::harness {

struct TrainingRecord {
  // Each parameter's values as float64, flattened, by its global name.
  std::map<std::string, std::vector<double>> parameters;
  // One loss per step (0 on ranks that compute none).
  std::vector<double> losses;
};

absl::Status WriteTrainingRecord(
    const std::string& path,
    const std::vector<std::pair<std::string, at::Tensor>>& parameters,
    const std::vector<double>& losses);

// DATA_LOSS when the file is truncated; NOT_FOUND when it is missing.
absl::StatusOr<TrainingRecord> ReadTrainingRecord(const std::string& path);

}  // namespace chimera::worker::harness

#endif  // CHIMERA_WORKER_HARNESS_TRAINING_RECORD_H_
