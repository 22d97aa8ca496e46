// A schedule in torch.distributed.pipelining's CSV (`chimera schedule
// --from-torch-csv`): reading and, for one that reads, validation. A
// schedule that reads must write back, and what it writes must read back
// to the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "schedule/torch_csv.h"
#include "schedule/validator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace schedule = chimera::schedule;
  const absl::string_view csv(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<schedule::Schedule> read = schedule::ReadTorchScheduleCsv(csv);
  if (!read.ok()) return 0;
  if (!schedule::ValidateSchedule(*read).ok()) std::abort();
  absl::StatusOr<std::string> written = schedule::WriteTorchScheduleCsv(*read);
  if (!written.ok()) std::abort();
  absl::StatusOr<schedule::Schedule> again = schedule::ReadTorchScheduleCsv(*written);
  if (!again.ok() || schedule::WriteTorchScheduleCsv(*again).value_or("") != *written) {
    std::abort();
  }
  return 0;
}
