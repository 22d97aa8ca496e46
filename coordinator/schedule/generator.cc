#include "coordinator/schedule/generator.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/schedule/bidirectional_generators.h"
#include "coordinator/schedule/linear_generators.h"

namespace chimera::schedule {

std::string ScheduleParamName(ScheduleParam param) {
  switch (param) {
    case ScheduleParam::kDepth:
      return "depth";
    case ScheduleParam::kMicroBatches:
      return "micro-batches";
    case ScheduleParam::kWidth:
      return "width";
    case ScheduleParam::kPipelines:
      return "pipelines";
    case ScheduleParam::kConcat:
      return "concat";
    case ScheduleParam::kMixPipeK:
      return "mixpipe-k";
    case ScheduleParam::kMixPipeGamma:
      return "mixpipe-gamma";
    case ScheduleParam::kChunks:
      return "chunks";
    case ScheduleParam::kBackwardSlots:
      return "backward-slots";
  }
  return "unknown";
}

absl::StatusOr<Schedule> GenerateSchedule(const ScheduleParams& params) {
  std::vector<ScheduleParamError> errors = ValidateScheduleParams(params);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(
        errors, "; ", [](std::string* out, const ScheduleParamError& e) {
          absl::StrAppend(out, ScheduleParamName(e.param), ": ", e.message);
        }));
  }
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
  }
  return absl::InvalidArgumentError("unknown scheme");
}

}  // namespace chimera::schedule
