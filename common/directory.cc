#include "common/directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/root_path.h"
#include "common/status_macros.h"

namespace chimera {
namespace {

enum class Openat2 { kUnknown, kAvailable, kMissing, kForcedOff };
std::atomic<Openat2> openat2_support{Openat2::kUnknown};

constexpr int kOpenat2Tries = 100;

// A directory tree being removed may still receive a file from a process
// that has not yet noticed it is superseded; each try removes what is there.
constexpr int kRemoveTries = 100;

absl::Status ErrnoStatus(int error, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

// Why opening `shown` failed with `error`, where a link is the likely cause.
absl::Status OpenError(int error, const std::string& shown, bool walked) {
  if (error == EXDEV) {
    return absl::PermissionDeniedError(absl::StrCat(
        shown, " leads out of the root through a symbolic link"));
  }
  if (error == ELOOP && walked) {
    return absl::PermissionDeniedError(absl::StrCat(
        shown,
        " is reached through a symbolic link, which this kernel (without "
        "openat2, Linux < 5.6) cannot follow safely; no link below the root "
        "is followed"));
  }
  if (error == ELOOP) {
    return absl::PermissionDeniedError(
        absl::StrCat(shown, " has too many symbolic links"));
  }
  if (error == ENOTDIR) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, " is not a directory"));
  }
  if (error == ENOENT) {
    return absl::NotFoundError(absl::StrCat(shown, " does not exist"));
  }
  return ErrnoStatus(error, absl::StrCat("cannot open ", shown));
}

std::vector<std::string> Components(absl::string_view path) {
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part != ".") parts.emplace_back(part);
  }
  return parts;
}

// openat2 beneath `dir`; -1 with errno, ENOSYS where the kernel lacks it.
int OpenBeneathOpenat2(int dir, const std::string& path, int flags) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  int fd = -1;
  // EAGAIN: a rename somewhere meanwhile kept the kernel from proving the
  // path stayed beneath; it asks the caller to try again.
  for (int tries = 0; tries < kOpenat2Tries; ++tries) {
    fd = static_cast<int>(
        syscall(SYS_openat2, dir, path.c_str(), &how, sizeof(how)));
    if (fd >= 0 || errno != EAGAIN) break;
  }
  return fd;
}

// openat of `name` in `dir` without following a link; -1 with errno, which
// is ELOOP for a link (O_DIRECTORY alone would say ENOTDIR).
int OpenNoFollow(int dir, const std::string& name, int flags) {
  const int fd = openat(dir, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
  struct stat info;
  if (fd < 0 && errno == ENOTDIR &&
      fstatat(dir, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISLNK(info.st_mode)) {
    errno = ELOOP;
  }
  return fd;
}

// Each component opened with O_NOFOLLOW; -1 with errno.
int OpenBeneathByWalk(int dir, const std::vector<std::string>& parts,
                      int flags) {
  UniqueFd current(fcntl(dir, F_DUPFD_CLOEXEC, 0));
  if (!current.valid()) return -1;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    UniqueFd next(OpenNoFollow(current.get(), parts[i], O_RDONLY | O_DIRECTORY));
    if (!next.valid()) return -1;
    current = std::move(next);
  }
  if (parts.empty()) return current.Release();
  return OpenNoFollow(current.get(), parts.back(), flags);
}

// `path` beneath `dir` opened with `flags` (no O_CREAT); -1 with errno;
// `walked` says how it was resolved.
int OpenBeneath(int dir, absl::string_view path, int flags, bool& walked) {
  const std::vector<std::string> parts = Components(path);
  const std::string joined = parts.empty() ? "." : absl::StrJoin(parts, "/");
  Openat2 support = openat2_support.load();
  if (support == Openat2::kUnknown || support == Openat2::kAvailable) {
    const int fd = OpenBeneathOpenat2(dir, joined, flags);
    // ENOSYS: an old kernel; EPERM: a seccomp filter that does not know
    // the call (container runtimes' default profiles before 2020).
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) {
      openat2_support.store(Openat2::kAvailable);
      walked = false;
      return fd;
    }
    if (errno == ENOSYS) openat2_support.store(Openat2::kMissing);
  }
  walked = true;
  return OpenBeneathByWalk(dir, parts, flags);
}

}  // namespace

void UseComponentWalkForTesting(bool walk) {
  openat2_support.store(walk ? Openat2::kForcedOff : Openat2::kUnknown);
}

Directory::Directory(UniqueFd fd, std::string path)
    : fd_(std::move(fd)), path_(std::move(path)) {}

std::string Directory::ChildPath(absl::string_view name) const {
  if (path_.empty()) return name.empty() ? "." : std::string(name);
  if (name.empty()) return path_;
  return absl::StrCat(path_, "/", name);
}

std::string Directory::Describe(absl::string_view name) const {
  return absl::StrCat("'", ChildPath(name), "'");
}

absl::StatusOr<Directory> Directory::OpenRoot(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("root '", path, "' is not an existing directory: ",
                     std::strerror(errno)));
  }
  return Directory(std::move(fd), "");
}

absl::StatusOr<Directory> Directory::Open(absl::string_view path,
                                          bool create) const {
  RETURN_IF_ERROR(CheckRootRelative(path));
  const std::vector<std::string> parts = Components(path);
  // Opened one more component at a time, each resolved from this directory,
  // so that a missing one can be made in the parent just opened.
  Directory current(UniqueFd(fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0)), path_);
  if (!current.fd_.valid()) {
    return ErrnoStatus(errno, absl::StrCat("cannot open ", Describe("")));
  }
  std::string prefix;
  for (const std::string& part : parts) {
    prefix = prefix.empty() ? part : absl::StrCat(prefix, "/", part);
    const std::string shown = Describe(prefix);
    bool walked = false;
    UniqueFd next(OpenBeneath(fd_.get(), prefix, O_RDONLY | O_DIRECTORY, walked));
    if (!next.valid() && errno == ENOENT && create) {
      if (mkdirat(current.fd_.get(), part.c_str(), 0755) != 0 &&
          errno != EEXIST) {
        return ErrnoStatus(errno, absl::StrCat("cannot create ", shown));
      }
      next = UniqueFd(
          OpenBeneath(fd_.get(), prefix, O_RDONLY | O_DIRECTORY, walked));
    }
    if (!next.valid()) return OpenError(errno, shown, walked);
    current = Directory(std::move(next), ChildPath(prefix));
  }
  return current;
}

absl::StatusOr<UniqueFd> Directory::OpenFile(absl::string_view path,
                                             int flags) const {
  RETURN_IF_ERROR(CheckRootRelative(path));
  bool walked = false;
  UniqueFd fd(OpenBeneath(fd_.get(), path, flags, walked));
  if (!fd.valid()) return OpenError(errno, Describe(path), walked);
  return fd;
}

absl::StatusOr<std::vector<Directory::Entry>> Directory::List() const {
  // A descriptor of its own, not a duplicate: a duplicate shares the read
  // position with every other, so two threads listing at once would each
  // see some entries twice or not at all. closedir closes it.
  const int own = openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* stream = own < 0 ? nullptr : fdopendir(own);
  if (stream == nullptr) {
    const int error = errno;
    if (own >= 0) close(own);
    return ErrnoStatus(error, absl::StrCat("cannot list ", Describe("")));
  }
  std::vector<Entry> entries;
  while (const dirent* entry = readdir(stream)) {
    const absl::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    unsigned char type = entry->d_type;
    if (type == DT_UNKNOWN) {
      struct stat info;
      if (fstatat(fd_.get(), entry->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0)
        continue;  // Gone meanwhile.
      type = S_ISDIR(info.st_mode) ? DT_DIR
             : S_ISREG(info.st_mode) ? DT_REG
                                     : DT_UNKNOWN;
    }
    entries.push_back({std::string(name), type == DT_DIR ? Entry::Type::kDirectory
                                          : type == DT_REG ? Entry::Type::kRegularFile
                                                           : Entry::Type::kOther});
  }
  closedir(stream);
  return entries;
}

absl::StatusOr<std::string> Directory::ReadFile(absl::string_view name,
                                                uint64_t max_bytes) const {
  const std::string shown = Describe(name);
  UniqueFd fd(openat(fd_.get(), std::string(name).c_str(),
                     O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return OpenError(errno, shown, /*walked=*/true);
  struct stat info;
  if (fstat(fd.get(), &info) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot read ", shown));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, " is not a regular file"));
  }
  if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        shown, " is ", info.st_size, " bytes; at most ", max_bytes,
        " are read"));
  }
  std::string bytes(static_cast<size_t>(info.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = read(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, absl::StrCat("cannot read ", shown));
    if (n == 0) break;  // Shrank meanwhile.
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

absl::Status Directory::WriteFileDurably(absl::string_view name,
                                         absl::string_view bytes) const {
  // Unique per process: another process may be writing the same name.
  const std::string temporary = absl::StrCat(name, ".tmp-", getpid());
  const std::string target(name);
  UniqueFd fd(openat(fd_.get(), temporary.c_str(),
                     O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                     0644));
  if (!fd.valid()) {
    return ErrnoStatus(errno,
                       absl::StrCat("cannot create ", Describe(temporary)));
  }
  const auto fail = [&](const std::string& what) {
    const absl::Status error = ErrnoStatus(errno, what);
    unlinkat(fd_.get(), temporary.c_str(), 0);
    return error;
  };
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n =
        write(fd.get(), bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(absl::StrCat("cannot write ", Describe(temporary)));
    written += static_cast<size_t>(n);
  }
  if (fsync(fd.get()) != 0) {
    return fail(absl::StrCat("cannot sync ", Describe(temporary)));
  }
  if (close(fd.Release()) != 0) {
    return fail(absl::StrCat("cannot write ", Describe(temporary)));
  }
  if (renameat(fd_.get(), temporary.c_str(), fd_.get(), target.c_str()) != 0) {
    return fail(absl::StrCat("cannot rename ", Describe(temporary), " to ",
                             Describe(target)));
  }
  if (fsync(fd_.get()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot sync ", Describe("")));
  }
  return absl::OkStatus();
}

absl::Status Directory::Remove(absl::string_view name) const {
  const std::string entry(name);
  struct stat info;
  if (fstatat(fd_.get(), entry.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(errno, absl::StrCat("cannot delete ", Describe(name)));
  }
  if (!S_ISDIR(info.st_mode)) {
    if (unlinkat(fd_.get(), entry.c_str(), 0) != 0 && errno != ENOENT) {
      return ErrnoStatus(errno,
                         absl::StrCat("cannot delete ", Describe(name)));
    }
    return absl::OkStatus();
  }
  UniqueFd child(openat(fd_.get(), entry.c_str(),
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!child.valid()) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoStatus(errno, absl::StrCat("cannot delete ", Describe(name)));
  }
  const Directory inside(std::move(child), ChildPath(name));
  for (int tries = 1;; ++tries) {
    ASSIGN_OR_RETURN(const std::vector<Entry> entries, inside.List());
    for (const Entry& e : entries) RETURN_IF_ERROR(inside.Remove(e.name));
    if (unlinkat(fd_.get(), entry.c_str(), AT_REMOVEDIR) == 0 ||
        errno == ENOENT) {
      return absl::OkStatus();
    }
    // ENOTEMPTY: something was added while the tree was emptied.
    if (errno != ENOTEMPTY || tries == kRemoveTries) {
      return ErrnoStatus(errno,
                         absl::StrCat("cannot delete ", Describe(name)));
    }
  }
}

}  // namespace chimera
