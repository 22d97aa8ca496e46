// Job files: YAML with the Kubernetes-style envelope
//
//   apiVersion: chimera.dev/v1alpha1
//   kind: TrainJob
//   metadata: {name: gpt-tiny}
//   spec: {model: {...}, data: {...}, training: {...}, parallelism: {...}}
//
// parsed strictly into chimera.v1.TrainJob (see jobspec/yaml_message.h) and
// validated (see job_validator.h).
//
//   absl::StatusOr<TrainJob> job = LoadJobFile("examples/chimera.yaml");
//   // On failure the status is INVALID_ARGUMENT (or NOT_FOUND for a missing
//   // file) with every problem on its own line: "spec.model.numHeads: ...".
#ifndef CHIMERA_JOBSPEC_JOB_FILE_H_
#define CHIMERA_JOBSPEC_JOB_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chimera/v1/job.pb.h"
#include "common/field_errors.h"
#include "jobspec/job_validator.h"

namespace chimera::jobspec {

// Parses, applies the model's preset (jobspec/model_presets.h) and
// validates; fills `job` only as far as parsing got.
FieldErrors LoadJobFile(const std::string& path,
                        const ValidationOptions& options,
                        chimera::v1::TrainJob* job);

// The same for YAML text already in memory.
FieldErrors ParseJob(absl::string_view yaml, const ValidationOptions& options,
                     chimera::v1::TrainJob* job);

// Convenience: the job, or INVALID_ARGUMENT listing every problem.
absl::StatusOr<chimera::v1::TrainJob> LoadJobFile(
    const std::string& path, const ValidationOptions& options = {});

// One line describing a valid job, e.g.
// "gpt-tiny: gpt 8 layers x 128 hidden, chimera D=4 W=1, 4 cpu workers,
//  batch 32, 50 steps".
std::string SummarizeJob(const chimera::v1::TrainJob& job);

}  // namespace chimera::jobspec

#endif  // CHIMERA_JOBSPEC_JOB_FILE_H_
