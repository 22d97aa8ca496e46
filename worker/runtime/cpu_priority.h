// How a CPU job's ranks share the cores of a host they outnumber.
//
// Where more ranks compute on a host than it has cores (a CPU job on a small
// machine), Linux shares the cores evenly among whichever ranks are ready.
// A schedule whose ranks carry unequal work (the stage with the model's
// head, ZB-H1's last rank) then makes its busiest rank, the step's critical
// path, wait for a core behind work that could have waited. Giving each
// rank a nice increment for how much less it computes than the busiest rank
// of its host gives it the cores in proportion to its work: the kernel's
// fair scheduler weighs each nice level about 1.25 times the next. A rank
// the schedule leaves idle still gets every core nobody else wants.
// Measured in docs/runtime-measurements.md ("Ranks that outnumber the
// cores").
//
//   task.nice_increment = NiceIncrements(busy_seconds, threads, cores)[i];
//   LowerCpuPriority(task.nice_increment);  // at the task's start
#ifndef CHIMERA_WORKER_RUNTIME_CPU_PRIORITY_H_
#define CHIMERA_WORKER_RUNTIME_CPU_PRIORITY_H_

#include <vector>

#include "absl/status/status.h"

namespace chimera::worker {

// The largest increment given: a rank computing under a tenth of the
// busiest one's work gets about a tenth of a contended core anyway, and a
// lower share would let a wrongly predicted rank fall far behind.
inline constexpr int kMaxNiceIncrement = 10;

// For the ranks of one host, each computing `busy_seconds[i]` a step, the
// nice increment of each: round(log(busiest / busy_i) / log(1.25)), at most
// kMaxNiceIncrement. All 0 where their threads fit the host
// (`threads_per_rank` x ranks <= `cores`: no rank waits for a core) or where
// a rank's busy time is unknown (not above 0).
std::vector<int> NiceIncrements(const std::vector<double>& busy_seconds,
                                int threads_per_rank, int cores);

// Lowers the CPU priority of every thread of this process by `increment`
// (0 does nothing), and so of every thread they start later. A process
// without privileges cannot take it back. INTERNAL naming the thread and
// the system's error when one cannot be lowered (a thread that ended
// meanwhile is not one).
absl::Status LowerCpuPriority(int increment);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_CPU_PRIORITY_H_
