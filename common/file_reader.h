// Reading user-supplied files with the checks every loader needs: the file
// exists, is a regular readable file, is not larger than the caller allows,
// and is text when text is expected.
//
//   ASSIGN_OR_RETURN(std::string yaml,
//                    ReadTextFile(path, kMaxManifestBytes));
#ifndef CHIMERA_COMMON_FILE_READER_H_
#define CHIMERA_COMMON_FILE_READER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera {

// Training data files larger than this are refused, by job validation and
// again by the worker that opens one (the coordinator cannot look): a
// typo'd path to a disk image, or a sparse file of holes, should fail fast.
inline constexpr uint64_t kMaxDataFileBytes = uint64_t{4} << 30;

// How much of a `text` training data file must look like text, checked by
// job validation and again by the worker that opens the file: enough to
// refuse a binary file (token ids, an archive, a model) given as text,
// without reading gigabytes whenever a task starts.
inline constexpr uint64_t kTextDataSniffBytes = 64 << 10;

// Size of a regular, readable file. NOT_FOUND if it does not exist,
// INVALID_ARGUMENT if it is a directory or another non-regular file,
// PERMISSION_DENIED if it cannot be opened for reading.
absl::StatusOr<uint64_t> RegularFileSize(const std::string& path);

// Whether `bytes` look like text: no NUL byte and valid UTF-8. A multi-byte
// character cut off at the very end of `bytes` is accepted, so a prefix of a
// larger file can be checked.
bool LooksLikeText(absl::string_view bytes);

// OK when `head`, the first kTextDataSniffBytes (or all) of the text data
// file that messages call `name`, LooksLikeText; INVALID_ARGUMENT naming
// `name` and saying why it is refused otherwise.
absl::Status CheckTextDataHead(absl::string_view name, absl::string_view head);

// The whole content of a non-empty text file of at most `max_bytes` bytes.
// Errors name the path and say what is wrong (missing, not a regular file,
// unreadable, empty, too large, binary).
absl::StatusOr<std::string> ReadTextFile(const std::string& path,
                                         uint64_t max_bytes);

// Up to `max_bytes` bytes from the start of the file.
absl::StatusOr<std::string> ReadFilePrefix(const std::string& path,
                                           uint64_t max_bytes);

}  // namespace chimera

#endif  // CHIMERA_COMMON_FILE_READER_H_
