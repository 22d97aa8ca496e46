// A schedule CSV (`chimera schedule --from-csv`): reading and, for one that
// reads, validation. A schedule that validates must survive a round trip
// through CSV unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "schedule/csv_io.h"
#include "schedule/validator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view csv(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<chimera::schedule::Schedule> schedule = chimera::schedule::ReadScheduleCsv(csv);
  if (!schedule.ok() || !chimera::schedule::ValidateSchedule(*schedule).ok()) return 0;
  const std::string written = chimera::schedule::WriteScheduleCsv(*schedule);
  absl::StatusOr<chimera::schedule::Schedule> again = chimera::schedule::ReadScheduleCsv(written);
  if (!again.ok() || chimera::schedule::WriteScheduleCsv(*again) != written) std::abort();
  return 0;
}
