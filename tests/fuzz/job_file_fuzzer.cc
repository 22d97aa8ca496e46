// A job file as a user (or an attacker, through the coordinator) writes it:
// parsing, semantic validation and, for a valid job, its one-line summary.
// Any crash, sanitizer report or hang is a bug; refusing the file is not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "jobspec/job_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view yaml(reinterpret_cast<const char*>(data), size);
  chimera::v1::TrainJob job;
  // As the coordinator validates a submitted job: the data file lives on
  // the workers.
  const chimera::FieldErrors errors =
      chimera::jobspec::ParseJob(yaml, chimera::jobspec::SpecOnly(), &job);
  if (errors.empty()) chimera::jobspec::SummarizeJob(job);
  return 0;
}
