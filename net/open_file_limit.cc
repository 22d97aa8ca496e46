#include "net/open_file_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chimera::net {

absl::StatusOr<uint64_t> RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::InternalError(
        absl::StrCat("reading the open-file limit: ", std::strerror(errno)));
  }
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t soft = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return absl::InternalError(absl::StrCat("raising the open-file limit from ",
                                              soft, " to ", limit.rlim_max, ": ",
                                              std::strerror(errno)));
    }
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

}  // namespace chimera::net
