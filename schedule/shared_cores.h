// The processors of nodes whose ranks outnumber their cores (CPU worker
// processes of one machine), as the simulator books work on them.
//
//   SharedCores cores(/*nodes=*/1, /*cores_per_node=*/2);
//   CoreSpan op = cores.Run(/*node=*/0, /*ready=*/1.0, /*work=*/0.5);
//   op.end;  // 1.5, or later where both cores are busy meanwhile
//
// Work runs whenever one of its node's cores is free, and on one core at a
// time (a rank computes on one thread). A free stretch too short for all of
// an op is used rather than skipped: an operating system's scheduler keeps
// every core busy while a process is runnable, so no core idles while work
// waits. Work booked earlier keeps its time, and what is booked later runs
// around it; the simulator books ops in the order it times them.
#ifndef CHIMERA_SCHEDULE_SHARED_CORES_H_
#define CHIMERA_SCHEDULE_SHARED_CORES_H_

#include <map>
#include <vector>

namespace chimera::schedule {

// When booked work starts and ends: later than start + work where it waited
// for a core on the way.
struct CoreSpan {
  double start = 0.0;
  double end = 0.0;
};

class SharedCores {
 public:
  SharedCores(int nodes, int cores_per_node);

  // Books `work` seconds on `node` from `ready` on.
  CoreSpan Run(int node, double ready, double work);

 private:
  // Time -> how many cores are busy from then until the next key; none
  // before the first.
  using BusyCores = std::map<double, int>;

  static int BusyAt(const BusyCores& busy, double t);
  static void Occupy(BusyCores& busy, CoreSpan span);

  std::vector<BusyCores> busy_;
  const int cores_per_node_;
};

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_SHARED_CORES_H_
