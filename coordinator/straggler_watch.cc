#include "coordinator/straggler_watch.h"

#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/str_format.h"

namespace chimera::coordinator {
namespace {

double Median(std::vector<double> values) {
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + middle, values.end());
  if (values.size() % 2 == 1) return values[middle];
  const double upper = values[middle];
  return (upper + *std::max_element(values.begin(), values.begin() + middle)) /
         2;
}

}  // namespace

std::string DescribeStraggler(const Straggler& straggler,
                              const std::string& worker) {
  return absl::StrFormat(
      "rank %d on worker %s straggles: its compute ran %.1fx its peers' "
      "median (against the plan's prediction) in each of %d steps since step "
      "%d",
      straggler.rank, worker, straggler.slowdown, kStragglerSteps,
      straggler.since_step);
}

void RecordStragglers(const std::vector<Straggler>& current,
                      const std::vector<std::string>& worker_of_rank,
                      chimera::v1::Job* job) {
  chimera::v1::JobStatus& status = *job->mutable_status();
  status.clear_stragglers();
  for (const Straggler& straggler : current) {
    chimera::v1::StragglingRank& rank = *status.add_stragglers();
    rank.set_rank(straggler.rank);
    rank.set_worker_id(worker_of_rank[straggler.rank]);
    rank.set_slowdown(straggler.slowdown);
    rank.set_since_step(straggler.since_step);
  }
}

StragglerWatch::StragglerWatch(const chimera::v1::Plan& plan, int ranks)
    : predicted_busy_(ranks, 0), slow_steps_(ranks, 0), slow_since_(ranks, 0) {
  const chimera::v1::Prediction& predicted = plan.prediction();
  const int simulated = predicted.rank_bubble_ratios_size();
  if (simulated == 0 || predicted.iteration_seconds() <= 0) return;
  for (int rank = 0; rank < ranks; ++rank) {
    // A data-parallel replica the prediction left out runs the program of
    // the rank at its pipeline position in the first replica.
    const double bubble = predicted.rank_bubble_ratios(rank % simulated);
    predicted_busy_[rank] = (1 - bubble) * predicted.iteration_seconds();
  }
}

std::vector<Straggler> StragglerWatch::Observe(const CompletedStep& step) {
  const int ranks = static_cast<int>(slow_steps_.size());
  if (ranks < 2 || static_cast<int>(step.ranks.size()) != ranks) return {};
  // Without a prediction for every rank, the ranks are taken to be alike.
  const bool predicted = absl::c_all_of(
      predicted_busy_, [](double seconds) { return seconds > 0; });
  std::vector<double> ratios;
  for (const auto& [rank, metrics] : step.ranks) {
    ratios.push_back(metrics.busy_seconds() /
                     (predicted ? predicted_busy_[rank] : 1.0));
  }
  const double median = Median(ratios);
  if (median <= 0) return {};
  std::vector<Straggler> found;
  std::vector<Straggler> current;
  for (int rank = 0; rank < ranks; ++rank) {
    const double slowdown = ratios[rank] / median;
    if (slowdown <= kStragglerFactor) {
      slow_steps_[rank] = 0;
      continue;
    }
    if (slow_steps_[rank]++ == 0) slow_since_[rank] = step.step;
    if (slow_steps_[rank] < kStragglerSteps) continue;
    const Straggler straggler{rank, slowdown, slow_since_[rank]};
    if (slow_steps_[rank] == kStragglerSteps) found.push_back(straggler);
    current.push_back(straggler);
  }
  current_ = std::move(current);
  return found;
}

}  // namespace chimera::coordinator
