#include "common/file_reader.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera {

absl::StatusOr<uint64_t> RegularFileSize(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat("'", path, "' does not exist"));
    }
    return absl::PermissionDeniedError(absl::StrCat(
        "'", path, "' cannot be read: ", std::strerror(error)));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' is ",
        S_ISDIR(info.st_mode) ? "a directory" : "not a regular file"));
  }
  std::ifstream probe(path, std::ios::binary);
  if (!probe) {
    return absl::PermissionDeniedError(
        absl::StrCat("'", path, "' cannot be opened for reading"));
  }
  return static_cast<uint64_t>(info.st_size);
}

bool LooksLikeText(absl::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (lead == 0) return false;
    int continuation;
    if (lead < 0x80) {
      continuation = 0;
    } else if ((lead & 0xE0) == 0xC0 && lead >= 0xC2) {
      continuation = 1;
    } else if ((lead & 0xF0) == 0xE0) {
      continuation = 2;
    } else if ((lead & 0xF8) == 0xF0 && lead <= 0xF4) {
      continuation = 3;
    } else {
      return false;
    }
    for (int k = 1; k <= continuation; ++k) {
      if (i + k >= bytes.size()) return true;  // Cut off at the end.
      if ((static_cast<unsigned char>(bytes[i + k]) & 0xC0) != 0x80) {
        return false;
      }
    }
    i += continuation + 1;
  }
  return true;
}

absl::Status CheckTextDataHead(absl::string_view name, absl::string_view head) {
  if (LooksLikeText(head)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "'", name, "' is binary, not UTF-8 text (its first ", head.size(),
      " bytes hold a NUL byte or invalid UTF-8); use format 'tokens' for "
      "token id files"));
}

absl::StatusOr<std::string> ReadFilePrefix(const std::string& path,
                                           uint64_t max_bytes) {
  ASSIGN_OR_RETURN(uint64_t size, RegularFileSize(path));
  std::ifstream in(path, std::ios::binary);
  std::string content(std::min(size, max_bytes), '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  content.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat("reading '", path, "' failed"));
  }
  return content;
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path,
                                         uint64_t max_bytes) {
  ASSIGN_OR_RETURN(uint64_t size, RegularFileSize(path));
  if (size == 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is empty"));
  }
  if (size > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is ", size, " bytes, more than the ",
                     max_bytes, "-byte limit"));
  }
  ASSIGN_OR_RETURN(std::string content, ReadFilePrefix(path, max_bytes));
  if (!LooksLikeText(content)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "' is not a text file (it holds NUL bytes or is not UTF-8)"));
  }
  return content;
}

}  // namespace chimera
