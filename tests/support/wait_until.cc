#include "tests/support/wait_until.h"

#include "absl/time/clock.h"

namespace chimera::testing {

bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout,
               absl::Duration period) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(period);
  }
  return true;
}

}  // namespace chimera::testing
