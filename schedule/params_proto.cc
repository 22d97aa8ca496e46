#include "schedule/params_proto.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

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

  // An integer the spec may leave out, in [min, kMaxScheduleSize].
  void Int(ScheduleParam param, bool present, int value, int min, int* field) {
    if (!present) return;
    if (value < min || value > kMaxScheduleSize) {
      Fail(param, absl::StrCat(value, " must be in [", min, ", ",
                               kMaxScheduleSize, "]"));
      return;
    }
    *field = value;
    Given(param);
  }

  // A knob's name the spec may leave empty.
  void Name(ScheduleParam param, const std::string& value,
            const KnobNames& names, ScheduleParams& params) {
    if (value.empty()) return;
    absl::Status parsed = names.parse(value, params);
    if (!parsed.ok()) {
      Fail(param, parsed.message());
      return;
    }
    Given(param);
  }

  void Given(ScheduleParam param) { out_->given.insert(param); }

 private:
  const ParamNamer& name_;
  SpecParams* out_;
  FieldErrors* errors_;
};

// The field of `message` (a ParallelismSpec or a Plan) that carries `knob`;
// the knob table test keeps every row naming a field of both.
const google::protobuf::FieldDescriptor& KnobField(
    const google::protobuf::Message& message, const Knob& knob) {
  return *message.GetDescriptor()->FindFieldByCamelcaseName(
      std::string(knob.field));
}

// Sets the knob's field of a ParallelismSpec or a Plan to its value in
// `params`.
void WriteKnob(const Knob& knob, const ScheduleParams& params,
               google::protobuf::Message* message) {
  const google::protobuf::Reflection& fields = *message->GetReflection();
  const google::protobuf::FieldDescriptor& field = KnobField(*message, knob);
  if (knob.names != nullptr) {
    fields.SetString(message, &field, knob.names->name(params));
  } else {
    fields.SetInt32(message, &field, params.*knob.number);
  }
}

void ReadKnob(const ParallelismSpec& spec, const Knob& knob, SpecReader& read,
              ScheduleParams& p) {
  const google::protobuf::Reflection& fields = *spec.GetReflection();
  const google::protobuf::FieldDescriptor& field = KnobField(spec, knob);
  if (knob.names != nullptr) {
    read.Name(knob.param, fields.GetString(spec, &field), *knob.names, p);
  } else {
    read.Int(knob.param, fields.HasField(spec, &field),
             fields.GetInt32(spec, &field), knob.least, &(p.*knob.number));
  }
}

void ReadSpec(const ParallelismSpec& spec, const TrainingSpec& training,
              SpecReader& read, ScheduleParams& p) {
  read.Int(ScheduleParam::kDepth, spec.has_pipeline(), spec.pipeline(), 1, &p.depth);
  read.Int(ScheduleParam::kWidth, spec.has_data(), spec.data(), 1, &p.width);
  read.Int(ScheduleParam::kMicroBatches, spec.has_micro_batches(),
           spec.micro_batches(), 1, &p.micro_batches);
  if (!spec.schedule().empty()) {
    absl::StatusOr<Scheme> scheme = ParseScheme(spec.schedule());
    if (scheme.ok()) {
      p.scheme = *scheme;
      read.Given(ScheduleParam::kScheme);
    } else {
      read.Fail(ScheduleParam::kScheme, scheme.status().message());
    }
  }
  for (const Knob& knob : kKnobs) ReadKnob(spec, knob, read, p);
  // A replication names every stage: it gives the depth a pipeline left out.
  if (!p.replication.empty() && !spec.has_pipeline()) {
    p.depth = static_cast<int>(p.replication.size());
    read.Given(ScheduleParam::kDepth);
  }
  p.recompute = training.recompute();
}

// With data fixed, a micro-batch size fixes the micro-batches too.
void DeriveMicroBatches(const TrainingSpec& training, SpecParams& out) {
  // In 64 bits: both factors are the spec's, of any size.
  const int64_t per_replica_batch =
      int64_t{out.params.width} * training.micro_batch_size();
  if (out.Gives(ScheduleParam::kMicroBatches) || !out.Gives(ScheduleParam::kWidth) ||
      per_replica_batch <= 0 || training.global_batch_size() % per_replica_batch != 0) {
    return;
  }
  out.params.micro_batches =
      static_cast<int>(training.global_batch_size() / per_replica_batch);
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
  // The planner may widen a sharded job to give its stages groups.
  if (!out->Gives(ScheduleParam::kWidth) &&
      checked.sharding != Sharding::kNone) {
    checked.width = 2;
  }
  for (const ScheduleParamError& error : ValidateScheduleParams(checked)) {
    read.Fail(error.param, error.message);
  }
  return errors;
}

void SetSpecKnob(const Knob& knob, const ScheduleParams& params,
                 ParallelismSpec* spec) {
  WriteKnob(knob, params, spec);
}

void SetScheduleParams(const ScheduleParams& p, int micro_batch_size,
                       chimera::v1::Plan* plan) {
  plan->set_scheme(SchemeName(p.scheme));
  plan->set_width(p.width);
  plan->set_depth(p.depth);
  plan->set_micro_batch_size(micro_batch_size);
  plan->set_micro_batches(p.micro_batches);
  plan->set_recompute(p.recompute);
  for (const Knob& knob : kKnobs) {
    if (KnobApplies(knob.param, p.scheme)) WriteKnob(knob, p, plan);
  }
  // Every plan says how many pipelines its workers run, not only Chimera's.
  if (!KnobApplies(ScheduleParam::kPipelines, p.scheme)) {
    plan->set_pipelines(IsBidirectional(p.scheme) ? 2 : 1);
  }
}

namespace {

// Reads `knob` from a plan into `p`; INVALID_ARGUMENT naming the plan field
// when its name does not parse.
absl::Status ReadPlanKnob(const chimera::v1::Plan& plan, const Knob& knob,
                          ScheduleParams& p) {
  const google::protobuf::Reflection& fields = *plan.GetReflection();
  const google::protobuf::FieldDescriptor& field = KnobField(plan, knob);
  if (knob.names == nullptr) {
    p.*knob.number = fields.GetInt32(plan, &field);
    return absl::OkStatus();
  }
  const std::string name = fields.GetString(plan, &field);
  if (name.empty()) return absl::OkStatus();
  absl::Status parsed = knob.names->parse(name, p);
  if (parsed.ok()) return parsed;
  return absl::InvalidArgumentError(
      absl::StrCat("plan.", knob.field, ": ", parsed.message()));
}

}  // namespace

int PlanWorkerCount(const chimera::v1::Plan& plan) {
  const absl::StatusOr<std::vector<int>> replication =
      ParseReplication(plan.replication());
  return plan.width() *
         WorkersPerPipeline(plan.depth(), replication.ok()
                                              ? *replication
                                              : std::vector<int>{});
}

absl::StatusOr<ScheduleParams> ScheduleParamsOf(const chimera::v1::Plan& plan) {
  ScheduleParams p;
  absl::StatusOr<Scheme> scheme = ParseScheme(plan.scheme());
  if (!scheme.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.scheme: ", scheme.status().message()));
  }
  p.scheme = *scheme;
  p.depth = plan.depth();
  p.width = plan.width();
  p.micro_batches = plan.micro_batches();
  p.recompute = plan.recompute();
  for (const Knob& knob : kKnobs) {
    if (KnobApplies(knob.param, p.scheme))
      RETURN_IF_ERROR(ReadPlanKnob(plan, knob, p));
  }
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
