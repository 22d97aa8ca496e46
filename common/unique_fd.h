// UniqueFd: owns one open file descriptor and closes it when destroyed, so
// that no early return of a function that opens files leaks one.
//
//   UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
//   if (!fd.valid()) return ErrnoError(...);
//   read(fd.get(), ...);
#ifndef CHIMERA_COMMON_UNIQUE_FD_H_
#define CHIMERA_COMMON_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace chimera {

class UniqueFd {
 public:
  UniqueFd() = default;
  // Takes `fd` (-1: none).
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  bool valid() const { return fd_ >= 0; }
  int get() const { return fd_; }
  // Gives the descriptor up without closing it.
  int Release() { return std::exchange(fd_, -1); }

 private:
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  int fd_ = -1;
};

}  // namespace chimera

#endif  // CHIMERA_COMMON_UNIQUE_FD_H_
