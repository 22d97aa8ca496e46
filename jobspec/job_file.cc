#include "jobspec/job_file.h"

#include "absl/strings/str_cat.h"
#include "jobspec/model_presets.h"
#include "jobspec/yaml_message.h"

namespace chimera::jobspec {
namespace {

// Only a document that parsed cleanly is worth validating: a rejected field
// would otherwise show up again as "missing". Nor is one whose preset is
// unknown, for the same reason.
FieldErrors ValidateParsed(FieldErrors parse_errors,
                           const ValidationOptions& options,
                           chimera::v1::TrainJob& job) {
  if (!parse_errors.empty()) return parse_errors;
  FieldErrors preset_errors;
  ApplyModelPreset(&job, &preset_errors);
  if (!preset_errors.empty()) return preset_errors;
  return ValidateJob(job, options);
}

std::string OrPlanner(bool has_value, int value) {
  return has_value ? absl::StrCat(value) : "auto";
}

}  // namespace

FieldErrors LoadJobFile(const std::string& path,
                        const ValidationOptions& options,
                        chimera::v1::TrainJob* job) {
  return ValidateParsed(LoadYamlMessageFile(path, job), options, *job);
}

FieldErrors ParseJob(absl::string_view yaml, const ValidationOptions& options,
                     chimera::v1::TrainJob* job) {
  return ValidateParsed(ParseYamlMessage(yaml, job), options, *job);
}

absl::StatusOr<chimera::v1::TrainJob> LoadJobFile(
    const std::string& path, const ValidationOptions& options) {
  chimera::v1::TrainJob job;
  FieldErrors errors = LoadJobFile(path, options, &job);
  if (!errors.empty()) return errors.ToStatus();
  return job;
}

std::string SummarizeJob(const chimera::v1::TrainJob& job) {
  const auto& spec = job.spec();
  const auto& parallelism = spec.parallelism();
  return absl::StrCat(
      job.metadata().name(), ": ", spec.model().family(), " ",
      spec.model().num_layers(), " layers x ", spec.model().hidden_size(),
      " hidden, ",
      parallelism.schedule().empty() ? "schedule auto" : parallelism.schedule(),
      " D=", OrPlanner(parallelism.has_pipeline(), parallelism.pipeline()),
      " W=", OrPlanner(parallelism.has_data(), parallelism.data()), ", ",
      OrPlanner(spec.resources().workers() > 0, spec.resources().workers()),
      " ",
      spec.resources().device().empty() ? "cpu" : spec.resources().device(),
      " workers, batch ", spec.training().global_batch_size(), ", ",
      spec.training().max_steps(), " steps");
}

}  // namespace chimera::jobspec
