#include "schedule/generator.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "schedule/asynchronous_generators.h"
#include "schedule/bidirectional_generators.h"
#include "schedule/linear_generators.h"
#include "schedule/mixpipe_generator.h"
#include "schedule/stage_replication.h"
#include "schedule/zero_bubble_generators.h"

namespace chimera::schedule {

namespace {

absl::StatusOr<Schedule> GenerateByScheme(const ScheduleParams& params) {
  switch (params.scheme) {
    case Scheme::kGpipe:
      return GenerateGpipe(params);
    case Scheme::kOneFOneB:
      return GenerateOneFOneB(params);
    case Scheme::kGems:
      return GenerateGems(params);
    case Scheme::kChimera:
      return GenerateChimera(params);
    case Scheme::kMixPipe:
      return GenerateMixPipe(params);
    case Scheme::kInterleaved:
      return GenerateInterleaved(params);
    case Scheme::kBreadthFirst:
      return GenerateBreadthFirst(params);
    case Scheme::kZbH1:
      return GenerateZeroBubbleH1(params);
    case Scheme::kZbH2:
      return GenerateZeroBubbleH2(params);
    case Scheme::kZbAuto:
      return GenerateZeroBubbleAuto(params);
    case Scheme::kZbV:
      return GenerateZeroBubbleV(params);
    case Scheme::kDualPipeV:
      return GenerateDualPipeV(params);
    case Scheme::kChimeraZb:
      return GenerateChimeraZeroBubble(params);
    case Scheme::kPipeDream:
      return GeneratePipeDream(params);
    case Scheme::kPipeDream2Bw:
      return GeneratePipeDream2Bw(params);
  }
  return absl::InvalidArgumentError("unknown scheme");
}

}  // namespace

absl::StatusOr<Schedule> GenerateSchedule(const ScheduleParams& params) {
  std::vector<ScheduleParamError> errors = ValidateScheduleParams(params);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(DescribeScheduleParamErrors(errors));
  }
  absl::StatusOr<Schedule> schedule = GenerateByScheme(params);
  if (!schedule.ok() || params.replication.empty()) return schedule;
  return ReplicateStages(*schedule, params.replication);
}

}  // namespace chimera::schedule
