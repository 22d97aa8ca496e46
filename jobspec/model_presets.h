// Published model configurations a job can name instead of writing every
// size: `spec.model.preset: llama3-8b` or `gpt2`. A preset fills each field
// the job leaves out (zero, empty, or unset for tieEmbeddings and
// ropeScaling); fields the job gives override it.
//
//   FieldErrors errors;
//   ApplyModelPreset(&job, &errors);
//
// The sizes are those of the models' published Hugging Face `config.json`
// files (openai-community/gpt2*, meta-llama/Llama-2-*-hf,
// meta-llama/Meta-Llama-3-*,
// meta-llama/Llama-3.1-405B, meta-llama/Llama-3.2-*); seqLength is the
// context they were pretrained with; Llama 3.1's and 3.2's rope scaling
// stretches it further.
#ifndef CHIMERA_JOBSPEC_MODEL_PRESETS_H_
#define CHIMERA_JOBSPEC_MODEL_PRESETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chimera/v1/job.pb.h"
#include "common/field_errors.h"

namespace chimera::jobspec {

// The presets' names, in the order the docs list them.
std::vector<std::string> ModelPresetNames();

// Fills the fields the job's spec.model leaves out from its preset, if it
// names one (and touches nothing otherwise). An unknown preset (with the
// closest name when one is near) or a family other than the preset's is
// reported on spec.model.preset / spec.model.family, and the job is left as
// it was.
void ApplyModelPreset(chimera::v1::TrainJob* job, FieldErrors* errors);

// `job` with its model's preset applied, for jobs that arrive by RPC rather
// than from a job file; INVALID_ARGUMENT as above.
absl::StatusOr<chimera::v1::TrainJob> WithModelPreset(
    chimera::v1::TrainJob job);

}  // namespace chimera::jobspec

#endif  // CHIMERA_JOBSPEC_MODEL_PRESETS_H_
