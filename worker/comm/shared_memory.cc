#include "worker/comm/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace chimera::worker {
namespace {

std::string Errno(int error) { return std::strerror(error); }

// Maps `fd` (closed either way) read-write and shared.
absl::StatusOr<void*> MapShared(int fd, size_t bytes, const std::string& name) {
  void* data =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, /*offset=*/0);
  const int error = errno;
  close(fd);
  if (data == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot map shared memory ", name, " (", bytes, " bytes): ",
        Errno(error)));
  }
  return data;
}

}  // namespace

absl::StatusOr<SharedMemorySegment> SharedMemorySegment::Create(
    const std::string& name, size_t bytes) {
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory ", name, " of 0 bytes"));
  }
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    const int error = errno;
    const std::string text =
        absl::StrCat("cannot create shared memory ", name, ": ", Errno(error));
    return error == EEXIST ? absl::AlreadyExistsError(text)
                           : absl::UnavailableError(text);
  }
  const int error = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (error != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot reserve ", bytes, " bytes of shared memory for ",
                     name, ": ", Errno(error)));
  }
  absl::StatusOr<void*> data = MapShared(fd, bytes, name);
  if (!data.ok()) {
    shm_unlink(name.c_str());
    return data.status();
  }
  return SharedMemorySegment(name, *data, bytes, /*owner=*/true);
}

absl::StatusOr<SharedMemorySegment> SharedMemorySegment::Open(
    const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int error = errno;
    const std::string text =
        absl::StrCat("cannot open shared memory ", name, ": ", Errno(error));
    return error == ENOENT ? absl::NotFoundError(text)
                           : absl::UnavailableError(text);
  }
  struct stat info;
  if (fstat(fd, &info) != 0 || static_cast<size_t>(info.st_size) != bytes) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory ", name, " is not ", bytes, " bytes"));
  }
  ASSIGN_OR_RETURN(void* data, MapShared(fd, bytes, name));
  return SharedMemorySegment(name, data, bytes, /*owner=*/false);
}

SharedMemorySegment::SharedMemorySegment(SharedMemorySegment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owner_(std::exchange(other.owner_, false)) {}

SharedMemorySegment& SharedMemorySegment::operator=(
    SharedMemorySegment&& other) noexcept {
  if (this != &other) {
    Release();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

SharedMemorySegment::~SharedMemorySegment() { Release(); }

void SharedMemorySegment::Unlink() {
  if (owner_) shm_unlink(name_.c_str());
  owner_ = false;
}

void SharedMemorySegment::Release() {
  Unlink();
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

std::string RandomSegmentName() {
  std::random_device device;
  const uint64_t random =
      (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
  return absl::StrFormat("/chimera-%d-%016x", getpid(), random);
}

}  // namespace chimera::worker
