// A safetensors file's header (spec.model.initFrom, `chimera export`):
// parsing any bytes as a whole file, and for a valid one, that its tensors
// tile the data after the header and that writing them again gives a header
// that parses to the same tensors.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<chimera::SafetensorsHeader> header =
      chimera::ParseSafetensorsHeader(bytes, size);
  if (!header.ok()) return 0;
  uint64_t end = 0;
  for (const chimera::SafetensorsTensor& tensor : header->tensors) {
    if (tensor.begin != end) __builtin_trap();
    end = tensor.end;
  }
  if (header->data_start + end != size) __builtin_trap();
  const absl::StatusOr<std::string> written =
      chimera::SerializeSafetensorsHeader(header->tensors, header->metadata);
  if (!written.ok()) __builtin_trap();
  const absl::StatusOr<chimera::SafetensorsHeader> again =
      chimera::ParseSafetensorsHeader(*written, written->size() + end);
  if (!again.ok() || again->tensors.size() != header->tensors.size() ||
      again->metadata != header->metadata) {
    __builtin_trap();
  }
  return 0;
}
