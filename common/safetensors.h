// Hugging Face's safetensors format, the layout of a file of named tensors:
//
//   uint64    N, little-endian: the header's length in bytes
//   N bytes   the header, a UTF-8 JSON object (padded with spaces):
//               {"<name>": {"dtype": "F32", "shape": [2, 3],
//                           "data_offsets": [BEGIN, END]}, ...,
//                "__metadata__": {"<key>": "<value>", ...}}   (optional)
//   the data  every tensor's bytes, row-major and little-endian, at
//             [BEGIN, END) from the data's start
//
// This is the format alone, without a tensor library: a header is parsed
// and checked against the file's size before any tensor is read, and written
// for tensors whose bytes the caller then appends in order.
//
//   ASSIGN_OR_RETURN(SafetensorsHeader header,
//                    ParseSafetensorsHeader(first_bytes, file_size));
//   for (const SafetensorsTensor& t : header.tensors)
//     pread(fd, buffer, t.end - t.begin, header.data_start + t.begin);
#ifndef CHIMERA_COMMON_SAFETENSORS_H_
#define CHIMERA_COMMON_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera {

struct SafetensorsTensor {
  std::string name;
  // "F64", "F32", "BF16", "I64", ... (SafetensorsDtypeBytes lists them).
  std::string dtype;
  std::vector<int64_t> shape;
  // Its bytes, relative to the start of the data.
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsHeader {
  // In the order of their data.
  std::vector<SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;
  // Where the data starts in the file: 8 + N.
  uint64_t data_start = 0;
};

// The weights of a Hugging Face model directory that fit in one file (what
// `chimera export` writes, spec.model.initFrom reads).
inline constexpr char kSafetensorsModelFile[] = "model.safetensors";

// The largest header read, as the format's reference implementation bounds
// it.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{100} << 20;

// Bytes per element of a safetensors dtype; nullopt for a name the format
// does not define.
std::optional<int> SafetensorsDtypeBytes(absl::string_view dtype);

// Parses the header at the start of a file of `file_size` bytes, `prefix`
// holding at least its first min(file_size, 8 + N) bytes (8 are enough to
// learn N). INVALID_ARGUMENT naming the fault when the header is not a JSON
// object of the layout above; when a tensor's dtype is unknown, its shape
// negative, or its byte count not its shape's; when the tensors' data do not
// tile the rest of the file exactly, in order, without gap or overlap; and
// OUT_OF_RANGE when `prefix` is too short to hold the header.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    absl::string_view prefix, uint64_t file_size);

// ParseSafetensorsHeader of the file at `path`, reading no more than its
// header. Errors as that, or the file's (missing, not a regular file,
// unreadable).
absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(
    const std::string& path);

// The same for the file open for reading as `fd` (read with pread, so its
// offset is left alone), which errors call `name`: for a file opened
// beneath a root (common/directory.h).
absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(
    int fd, const std::string& name);

// The first 8 + N bytes of a file holding `tensors` (their begin and end
// ignored: each follows the previous one, in order) and `metadata`; the
// header is padded with spaces so that the data starts 8-byte aligned.
// INVALID_ARGUMENT for an unknown dtype, a negative dimension, or a name
// given twice or reserved ("__metadata__").
absl::StatusOr<std::string> SerializeSafetensorsHeader(
    const std::vector<SafetensorsTensor>& tensors,
    const std::map<std::string, std::string>& metadata);

}  // namespace chimera

#endif  // CHIMERA_COMMON_SAFETENSORS_H_
