// Polling for a condition that becomes true in another process: a job
// state, a scrape, a log line. One helper, so that every test waits the
// same way and says what it waited for.
//
//   ASSERT_TRUE(WaitUntil([&] { return Scraped(); }, absl::Seconds(30)))
//       << "Prometheus never scraped the coordinator";
#ifndef CHIMERA_TESTS_SUPPORT_WAIT_UNTIL_H_
#define CHIMERA_TESTS_SUPPORT_WAIT_UNTIL_H_

#include <functional>

#include "absl/time/time.h"

namespace chimera::testing {

// Calls `done` every `period` until it returns true (true) or `timeout` has
// passed since the first call (false). `done` is called at least once.
bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout,
               absl::Duration period = absl::Milliseconds(100));

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_WAIT_UNTIL_H_
