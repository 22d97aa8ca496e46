// Clock: the two clocks a service needs. `wall` says when something
// happened, for what users see and what is stored (a job's submit and end
// times). `monotonic` measures how long since something happened, for every
// timeout and liveness judgement: it only moves forward, and setting the
// wall clock (an operator, NTP) moves it not at all. Tests give both one
// fake clock they advance by hand.
//
//   Clock clock;                                   // the real clocks
//   Clock fake = Clock::Fake([&] { return now; });  // a test's
//   const absl::Time deadline = clock.monotonic() + absl::Seconds(3);
#ifndef CHIMERA_COMMON_CLOCK_H_
#define CHIMERA_COMMON_CLOCK_H_

#include <time.h>

#include <functional>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace chimera {

// CLOCK_MONOTONIC as an absl::Time: meaningful only against another reading
// of it, never as a date.
inline absl::Time MonotonicNow() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return absl::TimeFromTimespec(now);
}

struct Clock {
  std::function<absl::Time()> wall = absl::Now;
  std::function<absl::Time()> monotonic = MonotonicNow;

  static Clock Fake(std::function<absl::Time()> now) { return {now, now}; }
};

}  // namespace chimera

#endif  // CHIMERA_COMMON_CLOCK_H_
