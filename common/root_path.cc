#include "common/root_path.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera {

namespace fs = std::filesystem;

absl::Status CheckRootRelative(absl::string_view path) {
  // Every system call reads a path up to its first NUL: "corpus.txt\0x"
  // would open corpus.txt, which is not what the job says.
  if (const size_t nul = path.find('\0'); nul != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path.substr(0, nul), "' is followed by a NUL byte (at byte ", nul,
        " of ", path.size(), "); a path cannot hold one"));
  }
  const fs::path given{std::string(path)};
  if (given.is_absolute()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path,
                     "' is absolute; give a path relative to the workers' "
                     "root (chimera-worker --data-root, --checkpoint-root)"));
  }
  for (const fs::path& part : given) {
    if (part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "' names a parent directory (..); it must stay inside "
                     "the workers' root"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CanonicalRoot(absl::string_view root) {
  std::error_code error;
  const fs::path canonical = fs::canonical(fs::path(std::string(root)), error);
  if (error || !fs::is_directory(canonical, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("root '", root, "' is not an existing directory",
                     error ? absl::StrCat(": ", error.message()) : ""));
  }
  return canonical.string();
}

absl::StatusOr<std::string> ResolveUnderRoot(absl::string_view root,
                                             absl::string_view path) {
  RETURN_IF_ERROR(CheckRootRelative(path));
  std::error_code error;
  const fs::path resolved = fs::weakly_canonical(
      fs::path(std::string(root)) / std::string(path), error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("'", path, "' cannot be resolved: ", error.message()));
  }
  std::string inside = resolved.string();
  // "DIR/." and "DIR/" resolve to "DIR/": the root itself.
  if (inside.size() > 1 && inside.back() == '/') inside.pop_back();
  const std::string prefix =
      absl::EndsWith(root, "/") ? std::string(root) : absl::StrCat(root, "/");
  if (inside != root && !absl::StartsWith(inside, prefix)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "'", path, "' leads out of the root through a symbolic link"));
  }
  return inside;
}

}  // namespace chimera
