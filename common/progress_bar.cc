#include "common/progress_bar.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace chimera {
namespace {

constexpr int kProgressWidth = 30;

}  // namespace

std::string ProgressBar(int done, int total, double seconds_per_unit) {
  const int filled =
      total > 0 ? kProgressWidth * std::min(done, total) / total : 0;
  std::string bar = std::string(filled, '=');
  if (filled < kProgressWidth)
    bar += ">" + std::string(kProgressWidth - filled - 1, ' ');
  const int64_t eta = static_cast<int64_t>(
      std::ceil(std::max(0, total - done) * seconds_per_unit));
  return absl::StrFormat("[%s] %d/%d  ETA %s", bar, done, total,
                         absl::FormatDuration(absl::Seconds(eta)));
}

}  // namespace chimera
