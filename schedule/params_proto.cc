#include "schedule/params_proto.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chimera::schedule {
namespace {

using chimera::v1::ParallelismSpec;
using chimera::v1::TrainingSpec;

// Reads the spec into `out`, recording what it gives; errors for sizes out
// of range and names that do not parse.
class SpecReader {
 public:
  SpecReader(const ParamNamer& name, SpecParams* out, FieldErrors* errors)
      : name_(name), out_(out), errors_(errors) {}

  void Fail(ScheduleParam param, absl::string_view message) {
    errors_->Add(name_(param), message);
  }

  // An integer the spec may leave out, at least `min`.
  void Int(ScheduleParam param, bool present, int value, int min, int* field) {
    if (!present) return;
    if (value < min) {
      Fail(param, absl::StrCat(value, " must be >= ", min));
      return;
    }
    *field = value;
    out_->given.insert(param);
  }

  // A name the spec may leave empty, parsed with `parse`.
  template <typename Enum, typename Parse>
  void Name(ScheduleParam param, const std::string& value, Parse parse,
            Enum* field) {
    if (value.empty()) return;
    absl::StatusOr<Enum> parsed = parse(value);
    if (!parsed.ok()) {
      Fail(param, parsed.status().message());
      return;
    }
    *field = *parsed;
    out_->given.insert(param);
  }

 private:
  const ParamNamer& name_;
  SpecParams* out_;
  FieldErrors* errors_;
};

void ReadSpec(const ParallelismSpec& spec, const TrainingSpec& training,
              SpecReader& read, ScheduleParams& p) {
  read.Int(ScheduleParam::kDepth, spec.has_pipeline(), spec.pipeline(), 1, &p.depth);
  read.Int(ScheduleParam::kWidth, spec.has_data(), spec.data(), 1, &p.width);
  read.Int(ScheduleParam::kMicroBatches, spec.has_micro_batches(),
           spec.micro_batches(), 1, &p.micro_batches);
  read.Int(ScheduleParam::kPipelines, spec.has_pipelines(), spec.pipelines(), 1,
           &p.pipelines);
  read.Int(ScheduleParam::kChunks, spec.has_chunks(), spec.chunks(), 1, &p.chunks);
  read.Int(ScheduleParam::kMixPipeK, spec.has_mixpipe_k(), spec.mixpipe_k(), 1,
           &p.mixpipe_k);
  read.Int(ScheduleParam::kMixPipeGamma, spec.has_mixpipe_gamma(),
           spec.mixpipe_gamma(), 0, &p.mixpipe_gamma);
  read.Name(ScheduleParam::kScheme, spec.schedule(), ParseScheme, &p.scheme);
  read.Name(ScheduleParam::kConcat, spec.concat(), ParseConcat, &p.concat);
  read.Name(ScheduleParam::kPolicy, spec.policy(), ParseWarmupPolicy, &p.policy);
  read.Name(ScheduleParam::kSync, spec.sync(), ParseSync, &p.sync);
  p.recompute = training.recompute();
}

// With data fixed, a micro-batch size fixes the micro-batches too.
void DeriveMicroBatches(const TrainingSpec& training, SpecParams& out) {
  const int per_replica_batch = out.params.width * training.micro_batch_size();
  if (out.Gives(ScheduleParam::kMicroBatches) || !out.Gives(ScheduleParam::kWidth) ||
      per_replica_batch <= 0 || training.global_batch_size() % per_replica_batch != 0) {
    return;
  }
  out.params.micro_batches = training.global_batch_size() / per_replica_batch;
  out.given.insert(ScheduleParam::kMicroBatches);
}

}  // namespace

bool SpecParams::FixesSchedule() const {
  return Gives(ScheduleParam::kScheme) && Gives(ScheduleParam::kDepth) &&
         Gives(ScheduleParam::kWidth) && Gives(ScheduleParam::kMicroBatches);
}

std::string JobFieldPath(ScheduleParam param) {
  if (param == ScheduleParam::kRecompute) return "spec.training.recompute";
  if (param == ScheduleParam::kBackwardSlots) return "spec.parallelism";
  return absl::StrCat("spec.parallelism.", ScheduleParamField(param));
}

FieldErrors ScheduleParamsFromSpec(const ParallelismSpec& parallelism,
                                   const TrainingSpec& training, SpecParams* out,
                                   const ParamNamer& name) {
  *out = SpecParams();
  FieldErrors errors;
  SpecReader read(name, out, &errors);
  ReadSpec(parallelism, training, read, out->params);
  if (!out->Gives(ScheduleParam::kScheme)) return errors;

  // A knob of another scheme is a mistake, not something to ignore.
  const Scheme scheme = out->params.scheme;
  for (ScheduleParam knob : out->given) {
    if (!KnobApplies(knob, scheme)) {
      read.Fail(knob, absl::StrCat("only applies to schedule ", SchemesReading(knob),
                                   ", not '", SchemeName(scheme), "'"));
    }
  }
  if (!errors.empty() || !out->Gives(ScheduleParam::kDepth)) return errors;

  DeriveMicroBatches(training, *out);
  ScheduleParams checked = out->params;
  if (!out->Gives(ScheduleParam::kMicroBatches)) {
    checked.micro_batches = 2 * checked.depth;
  }
  for (const ScheduleParamError& error : ValidateScheduleParams(checked)) {
    read.Fail(error.param, error.message);
  }
  return errors;
}

void SetScheduleParams(const ScheduleParams& p, int micro_batch_size,
                       chimera::v1::Plan* plan) {
  plan->set_scheme(SchemeName(p.scheme));
  plan->set_width(p.width);
  plan->set_depth(p.depth);
  plan->set_micro_batch_size(micro_batch_size);
  plan->set_micro_batches(p.micro_batches);
  plan->set_pipelines(p.scheme == Scheme::kChimera ? p.pipelines
                      : IsBidirectional(p.scheme)  ? 2
                                                   : 1);
  auto applies = [&p](ScheduleParam knob) { return KnobApplies(knob, p.scheme); };
  if (applies(ScheduleParam::kConcat)) plan->set_concat(ConcatName(p.concat));
  plan->set_sync(SyncName(p.sync));
  if (applies(ScheduleParam::kPolicy)) plan->set_policy(WarmupPolicyName(p.policy));
  plan->set_recompute(p.recompute);
  if (applies(ScheduleParam::kMixPipeK)) plan->set_mixpipe_k(p.mixpipe_k);
  if (applies(ScheduleParam::kMixPipeGamma)) plan->set_mixpipe_gamma(p.mixpipe_gamma);
  if (applies(ScheduleParam::kChunks)) plan->set_chunks(p.chunks);
}

absl::StatusOr<ScheduleParams> ScheduleParamsOf(const chimera::v1::Plan& plan) {
  ScheduleParams p;
  auto named = [](absl::string_view field, auto parsed) -> decltype(parsed) {
    if (parsed.ok()) return parsed;
    return absl::InvalidArgumentError(
        absl::StrCat("plan.", field, ": ", parsed.status().message()));
  };
  {
    auto scheme = named("scheme", ParseScheme(plan.scheme()));
    if (!scheme.ok()) return scheme.status();
    p.scheme = *scheme;
  }
  if (!plan.concat().empty()) {
    auto concat = named("concat", ParseConcat(plan.concat()));
    if (!concat.ok()) return concat.status();
    p.concat = *concat;
  }
  if (!plan.sync().empty()) {
    auto sync = named("sync", ParseSync(plan.sync()));
    if (!sync.ok()) return sync.status();
    p.sync = *sync;
  }
  if (!plan.policy().empty()) {
    auto policy = named("policy", ParseWarmupPolicy(plan.policy()));
    if (!policy.ok()) return policy.status();
    p.policy = *policy;
  }
  p.depth = plan.depth();
  p.width = plan.width();
  p.micro_batches = plan.micro_batches();
  auto applies = [&p](ScheduleParam knob) { return KnobApplies(knob, p.scheme); };
  if (applies(ScheduleParam::kPipelines)) p.pipelines = plan.pipelines();
  if (applies(ScheduleParam::kMixPipeK)) p.mixpipe_k = plan.mixpipe_k();
  if (applies(ScheduleParam::kMixPipeGamma)) p.mixpipe_gamma = plan.mixpipe_gamma();
  if (applies(ScheduleParam::kChunks)) p.chunks = plan.chunks();
  p.recompute = plan.recompute();
  const auto errors = ValidateScheduleParams(p);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan: ",
        absl::StrJoin(errors, "; ", [](std::string* out, const auto& e) {
          out->append(e.message);
        })));
  }
  return p;
}

}  // namespace chimera::schedule
