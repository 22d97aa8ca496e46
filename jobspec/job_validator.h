// Semantic validation of a TrainJob: the rules the schema alone cannot say
// (positive sizes, hiddenSize divisible by numHeads, a global batch that
// data x micro-batch size x micro-batches can make, a schedule's own
// parameter rules, data and checkpoint paths that stay inside the workers'
// roots (common/root_path.h), data files that exist and hold what their
// format says).
// Every problem is reported, each naming its field path as written in the
// job file, the value, and what is allowed.
//
//   FieldErrors errors = ValidateJob(job, {.check_data_files = true});
#ifndef CHIMERA_JOBSPEC_JOB_VALIDATOR_H_
#define CHIMERA_JOBSPEC_JOB_VALIDATOR_H_

#include <cstdint>
#include <string>

#include "chimera/v1/job.pb.h"
#include "common/field_errors.h"
#include "schedule/schedule_params.h"

namespace chimera::jobspec {

inline constexpr char kTrainJobKind[] = "TrainJob";

struct ValidationOptions {
  // Check that the data file exists and is readable, non-empty, within
  // kMaxDataFileBytes and of the declared format. Off where the file lives
  // on other machines (the coordinator validating a submitted job).
  bool check_data_files = true;
  // The directory spec.data.path is relative to when data files are checked:
  // the data root of the workers that will read it (`chimera run` starts its
  // workers with the current directory as theirs); empty is the current
  // directory.
  std::string data_root;
};

// The spec alone, its data file unchecked: where the file lives on other
// machines (the coordinator validating a submitted job, planning).
inline ValidationOptions SpecOnly() {
  return {.check_data_files = false, .data_root = {}};
}

FieldErrors ValidateJob(const chimera::v1::TrainJob& job,
                        const ValidationOptions& options);

// Whether a valid job may train with `scheme`, PipeDream or PipeDream-2BW:
// it consents to asynchronous training (spec.parallelism.allowAsynchronous),
// and for PipeDream does not tie its embeddings across stages.
bool AllowsAsynchronousScheme(const chimera::v1::JobSpec& spec,
                              schedule::Scheme scheme);

// The workers of one pipeline a spec fixes: the sum of its replication
// ("2:1" -> 3), else its pipeline; 0 where it fixes neither (or the
// replication does not parse, which validation reports).
int WorkersPerPipeline(const chimera::v1::ParallelismSpec& parallelism);

}  // namespace chimera::jobspec

#endif  // CHIMERA_JOBSPEC_JOB_VALIDATOR_H_
