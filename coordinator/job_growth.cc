#include "coordinator/job_growth.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "schedule/params_proto.h"

namespace chimera::coordinator {
namespace {

std::string Describe(const chimera::v1::Plan& plan) {
  return absl::StrCat(plan.scheme(), " W=", plan.width(), " D=", plan.depth());
}

}  // namespace

std::optional<GrowthWorkers> GrowthWorkersFor(
    const chimera::v1::Job& job, const std::vector<std::string>& placed,
    const std::vector<std::string>& idle) {
  const size_t asked = job.manifest().spec().resources().workers();
  if (placed.size() >= asked || idle.empty()) return std::nullopt;
  GrowthWorkers grow{placed, ""};
  const size_t taken = std::min(idle.size(), asked - placed.size());
  grow.workers.insert(grow.workers.end(), idle.begin(), idle.begin() + taken);
  grow.key =
      absl::StrCat("grow ", job.id(), " ", absl::StrJoin(grow.workers, ","));
  return grow;
}

std::optional<std::string> WorthGrowing(const chimera::v1::Job& job,
                                        const chimera::v1::Plan& now,
                                        const chimera::v1::Plan& bigger) {
  const double now_seconds = now.prediction().iteration_seconds();
  const double bigger_seconds = bigger.prediction().iteration_seconds();
  if (now_seconds <= 0 || bigger_seconds <= 0) return std::nullopt;
  const auto& policy = job.manifest().spec().run_policy();
  const double threshold = policy.has_grow_threshold() ? policy.grow_threshold()
                                                       : kDefaultGrowThreshold;
  const double speedup = now_seconds / bigger_seconds;
  if (speedup < 1 + threshold) return std::nullopt;
  return absl::StrFormat(
      "growing from %d to %d workers (%s to %s, predicted %.2fx as fast)",
      schedule::PlanWorkerCount(now), schedule::PlanWorkerCount(bigger),
      Describe(now), Describe(bigger), speedup);
}

}  // namespace chimera::coordinator
