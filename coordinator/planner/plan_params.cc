#include "coordinator/planner/plan_params.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/planner/stage_partition.h"

namespace chimera::planner {

using schedule::Scheme;

void SetScheduleParams(const schedule::ScheduleParams& p, int micro_batch_size,
                       chimera::v1::Plan* plan) {
  plan->set_scheme(schedule::SchemeName(p.scheme));
  plan->set_width(p.width);
  plan->set_depth(p.depth);
  plan->set_micro_batch_size(micro_batch_size);
  plan->set_micro_batches(p.micro_batches);
  plan->set_pipelines(p.scheme == Scheme::kChimera      ? p.pipelines
                      : schedule::IsBidirectional(p.scheme) ? 2
                                                            : 1);
  if (p.scheme == Scheme::kChimera) plan->set_concat(schedule::ConcatName(p.concat));
  plan->set_sync(schedule::SyncName(p.sync));
  if (p.scheme == Scheme::kOneFOneB) {
    plan->set_policy(schedule::WarmupPolicyName(p.policy));
  }
  plan->set_recompute(p.recompute);
  if (p.scheme == Scheme::kMixPipe) {
    plan->set_mixpipe_k(p.mixpipe_k);
    plan->set_mixpipe_gamma(p.mixpipe_gamma);
  }
  if (schedule::IsLooping(p.scheme)) plan->set_chunks(p.chunks);
}

absl::StatusOr<schedule::ScheduleParams> ScheduleParamsOf(const chimera::v1::Plan& plan) {
  schedule::ScheduleParams p;
  auto named = [](absl::string_view field, auto parsed) -> decltype(parsed) {
    if (parsed.ok()) return parsed;
    return absl::InvalidArgumentError(
        absl::StrCat("plan.", field, ": ", parsed.status().message()));
  };
  {
    auto scheme = named("scheme", schedule::ParseScheme(plan.scheme()));
    if (!scheme.ok()) return scheme.status();
    p.scheme = *scheme;
  }
  if (!plan.concat().empty()) {
    auto concat = named("concat", schedule::ParseConcat(plan.concat()));
    if (!concat.ok()) return concat.status();
    p.concat = *concat;
  }
  if (!plan.sync().empty()) {
    auto sync = named("sync", schedule::ParseSync(plan.sync()));
    if (!sync.ok()) return sync.status();
    p.sync = *sync;
  }
  if (!plan.policy().empty()) {
    auto policy = named("policy", schedule::ParseWarmupPolicy(plan.policy()));
    if (!policy.ok()) return policy.status();
    p.policy = *policy;
  }
  p.depth = plan.depth();
  p.width = plan.width();
  p.micro_batches = plan.micro_batches();
  if (p.scheme == Scheme::kChimera) p.pipelines = plan.pipelines();
  if (p.scheme == Scheme::kMixPipe) {
    p.mixpipe_k = plan.mixpipe_k();
    p.mixpipe_gamma = plan.mixpipe_gamma();
  }
  if (schedule::IsLooping(p.scheme)) p.chunks = plan.chunks();
  p.recompute = plan.recompute();
  const auto errors = schedule::ValidateScheduleParams(p);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan: ", absl::StrJoin(errors, "; ", [](std::string* out, const auto& e) {
          out->append(e.message);
        })));
  }
  return p;
}

std::optional<chimera::v1::Plan> FixedPlan(const chimera::v1::TrainJob& job) {
  const auto& spec = job.spec();
  const auto& fixed = spec.parallelism();
  const int global = spec.training().global_batch_size();
  if (fixed.schedule().empty() || !fixed.has_pipeline() || !fixed.has_data()) {
    return std::nullopt;
  }
  int micro_batches = 0;
  if (fixed.has_micro_batches()) {
    micro_batches = fixed.micro_batches();
  } else if (spec.training().micro_batch_size() > 0) {
    micro_batches = global / (fixed.data() * spec.training().micro_batch_size());
  } else {
    return std::nullopt;
  }
  schedule::ScheduleParams p;
  p.scheme = *schedule::ParseScheme(fixed.schedule());
  p.depth = fixed.pipeline();
  p.width = fixed.data();
  p.micro_batches = micro_batches;
  if (fixed.has_pipelines()) p.pipelines = fixed.pipelines();
  if (!fixed.concat().empty()) p.concat = *schedule::ParseConcat(fixed.concat());
  if (!fixed.sync().empty()) p.sync = *schedule::ParseSync(fixed.sync());
  if (!fixed.policy().empty()) p.policy = *schedule::ParseWarmupPolicy(fixed.policy());
  if (fixed.has_mixpipe_k()) p.mixpipe_k = fixed.mixpipe_k();
  if (fixed.has_mixpipe_gamma()) p.mixpipe_gamma = fixed.mixpipe_gamma();
  if (fixed.has_chunks()) p.chunks = fixed.chunks();
  p.recompute = spec.training().recompute();

  chimera::v1::Plan plan;
  SetScheduleParams(p, global / (p.width * micro_batches), &plan);
  const int stages = p.depth * (schedule::IsLooping(p.scheme) ? p.chunks : 1);
  const std::vector<BlockRange> ranges = EvenPartition(spec.model().num_layers(), stages);
  for (int s = 0; s < stages; ++s) {
    auto* range = plan.add_partition();
    range->set_stage(s);
    range->set_first_layer(ranges[s].first_block);
    range->set_num_layers(ranges[s].num_blocks);
  }
  return plan;
}

}  // namespace chimera::planner
