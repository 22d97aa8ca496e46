// Which ranks of a run compute consistently slower than their peers. Per
// completed step, each rank's compute time (its busy seconds: forward,
// backward and optimizer ops) is divided by what the plan predicts for it,
// so that stages the planner knows to be heavier are no stragglers; a rank
// whose ratio stays above kStragglerFactor times the ranks' median for
// kStragglerSteps steps in a row straggles, until a step brings it back
// under.
//
//   StragglerWatch watch(plan, ranks);
//   for (const Straggler& found : watch.Observe(step).found) report it;
//   watch.current();  // the ranks straggling now
#ifndef CHIMERA_COORDINATOR_STRAGGLER_WATCH_H_
#define CHIMERA_COORDINATOR_STRAGGLER_WATCH_H_

#include <string>
#include <vector>

#include "chimera/v1/plan.pb.h"
#include "chimera/v1/service.pb.h"
#include "coordinator/step_aggregator.h"

namespace chimera::coordinator {

inline constexpr double kStragglerFactor = 1.5;
inline constexpr int kStragglerSteps = 5;

struct Straggler {
  int rank = 0;
  // Its compute time over the prediction, against the median rank's, in
  // the step that made it one.
  double slowdown = 0;
  // The first of the slow steps in a row.
  int since_step = 0;
};

// "rank 2 on worker w2 straggles: its compute ran 2.1x its peers' median
// (against the plan's prediction) in each of 5 steps since step 12".
std::string DescribeStraggler(const Straggler& straggler,
                              const std::string& worker);

// Sets `job`'s status.stragglers to `current`, rank r on worker_of_rank[r].
void RecordStragglers(const std::vector<Straggler>& current,
                      const std::vector<std::string>& worker_of_rank,
                      chimera::v1::Job* job);

class StragglerWatch {
 public:
  StragglerWatch() = default;
  // For a run of `plan` on `ranks` ranks.
  StragglerWatch(const chimera::v1::Plan& plan, int ranks);

  // Step `step` completed: the ranks that became stragglers with it.
  std::vector<Straggler> Observe(const CompletedStep& step);
  // The ranks straggling now, by rank.
  const std::vector<Straggler>& current() const { return current_; }

 private:
  // Per rank: the compute time the plan predicts (0: none), the slow steps
  // in a row and the first of them.
  std::vector<double> predicted_busy_;
  std::vector<int> slow_steps_;
  std::vector<int> slow_since_;
  std::vector<Straggler> current_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_STRAGGLER_WATCH_H_
