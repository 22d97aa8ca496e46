// Directory: a directory held open by its descriptor, with every operation
// on what lies beneath it made relative to that descriptor (openat, mkdirat,
// renameat, unlinkat). A job's files live under roots the worker's operator
// chose (--data-root, --checkpoint-root); checking a path and opening it
// later by name lets whoever can write inside the root swap a component for
// a symbolic link in between. Here the kernel resolves each path while it
// opens it:
//   - with openat2(RESOLVE_BENEATH) (Linux 5.6 and later) a path may follow
//     symbolic links that stay beneath the directory, and one that leads out
//     of it is refused however it is swapped;
//   - without openat2 each component is opened with O_NOFOLLOW, so no
//     symbolic link below the directory is followed at all.
// Once open, a directory stays the one that was opened: replacing its path
// by a link afterwards changes nothing for its holder. Names given to the
// single-entry calls (List, WriteFileDurably, Remove, ...) are entries of
// this directory and are never followed through a link.
//
// Errors name paths relative to the root (the root's own path is the
// operator's business, not a job's), e.g. 'ckpt/job-1/step-4'.
//
//   ASSIGN_OR_RETURN(Directory root, Directory::OpenRoot(flags.checkpoint_root));
//   ASSIGN_OR_RETURN(Directory job, root.Open("ckpt/job-1", /*create=*/true));
//   RETURN_IF_ERROR(job.WriteFileDurably("attempt", "3"));
#ifndef CHIMERA_COMMON_DIRECTORY_H_
#define CHIMERA_COMMON_DIRECTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/unique_fd.h"

namespace chimera {

class Directory {
 public:
  // The directory at `path`, an operator's root (followed wherever it
  // leads). INVALID_ARGUMENT naming it when it is not a directory.
  static absl::StatusOr<Directory> OpenRoot(const std::string& path);

  Directory(Directory&&) = default;
  Directory& operator=(Directory&&) = default;

  // The directory `path` beneath this one (relative, no "..": see
  // CheckRootRelative; "" is this one again), created with its missing
  // parents when `create`. NOT_FOUND when it does not exist,
  // PERMISSION_DENIED when it would lead out through a symbolic link,
  // INVALID_ARGUMENT when it is not a directory.
  absl::StatusOr<Directory> Open(absl::string_view path, bool create) const;

  // The file `path` beneath this directory, opened with `flags` (O_RDONLY,
  // ...; O_CLOEXEC is added). Errors as Open's.
  absl::StatusOr<UniqueFd> OpenFile(absl::string_view path, int flags) const;

  struct Entry {
    enum class Type { kDirectory, kRegularFile, kOther };
    std::string name;
    Type type = Type::kOther;
  };
  // The entries of this directory ("." and ".." left out), a symbolic link
  // as kOther. Threads may list one Directory at once: each sees every entry
  // that stays meanwhile exactly once.
  absl::StatusOr<std::vector<Entry>> List() const;

  // The whole of regular file `name`, of at most `max_bytes`.
  absl::StatusOr<std::string> ReadFile(absl::string_view name,
                                       uint64_t max_bytes) const;

  // Makes `name` hold `bytes`, whole or not at all, durably: written to a
  // temporary entry of this process, synced, renamed over `name`, and this
  // directory synced. A failure removes the temporary entry again.
  // RESOURCE_EXHAUSTED when the disk or quota is full, INTERNAL otherwise.
  absl::Status WriteFileDurably(absl::string_view name,
                                absl::string_view bytes) const;

  // Removes entry `name`: a file or link (never what it points to), or a
  // directory with everything in it. Entries that vanish meanwhile (another
  // process removing the same tree) are no error, nor is a missing `name`.
  absl::Status Remove(absl::string_view name) const;

  // This directory's path relative to the root it was opened from.
  const std::string& path() const { return path_; }
  // `name` in this directory as errors show it: 'path/name'.
  std::string Describe(absl::string_view name) const;

 private:
  Directory(UniqueFd fd, std::string path);
  // `name` relative to the root.
  std::string ChildPath(absl::string_view name) const;

  UniqueFd fd_;
  std::string path_;
};

// Makes every Directory resolve paths as on a kernel without openat2 (true)
// or as the kernel allows (false); for tests of the fallback.
void UseComponentWalkForTesting(bool walk);

}  // namespace chimera

#endif  // CHIMERA_COMMON_DIRECTORY_H_
