#include "worker/runtime/cpu_priority.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace chimera::worker {
namespace {

// The fair scheduler's weight ratio between neighbouring nice levels.
constexpr double kWeightPerNiceLevel = 1.25;

// Lowers thread `tid`'s priority by `increment`. OK for a thread that ended.
absl::Status LowerThread(int tid, int increment) {
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  if (nice == -1 && errno != 0) {
    if (errno == ESRCH) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("reading the priority of thread ",
                                            tid, ": ", std::strerror(errno)));
  }
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice + increment) ==
          0 ||
      errno == ESRCH) {
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat("lowering the priority of thread ",
                                          tid, " by ", increment, ": ",
                                          std::strerror(errno)));
}

}  // namespace

std::vector<int> NiceIncrements(const std::vector<double>& busy_seconds,
                                int threads_per_rank, int cores) {
  std::vector<int> increments(busy_seconds.size(), 0);
  const double threads =
      static_cast<double>(std::max(1, threads_per_rank)) * busy_seconds.size();
  const bool known = std::all_of(busy_seconds.begin(), busy_seconds.end(),
                                 [](double busy) { return busy > 0; });
  if (threads <= cores || !known) return increments;
  const double busiest =
      *std::max_element(busy_seconds.begin(), busy_seconds.end());
  for (size_t i = 0; i < busy_seconds.size(); ++i) {
    const double levels =
        std::log(busiest / busy_seconds[i]) / std::log(kWeightPerNiceLevel);
    increments[i] =
        std::min(kMaxNiceIncrement, static_cast<int>(std::lround(levels)));
  }
  return increments;
}

absl::Status LowerCpuPriority(int increment) {
  if (increment <= 0) return absl::OkStatus();
  // Linux keeps a nice value per thread: lowering the process's id alone
  // would leave the threads already started (the BLAS's, OpenMP's) as they
  // were.
  const std::unique_ptr<DIR, int (*)(DIR*)> threads(
      ::opendir("/proc/self/task"), &::closedir);
  if (threads == nullptr) {
    return absl::InternalError(
        absl::StrCat("listing this process's threads: ", std::strerror(errno)));
  }
  while (const dirent* entry = ::readdir(threads.get())) {
    int tid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &tid)) continue;  // "." and ".."
    if (absl::Status lowered = LowerThread(tid, increment); !lowered.ok()) {
      return lowered;
    }
  }
  return absl::OkStatus();
}

}  // namespace chimera::worker
