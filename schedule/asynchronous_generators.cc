#include "schedule/asynchronous_generators.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/linear_generators.h"

namespace chimera::schedule {
namespace {

// The repeating step is cut from a flat no-flush order (1F1B's over this
// many steps' micro-batches, whose cool-down is the drain): step 1 is in
// the steady state as N >= D, step 2 proves that it repeats, and step 3
// keeps step 2 clear of the cool-down.
constexpr int kFlatSteps = 4;

// A worker's flat program with its gradient sums and its one optimizer step
// at the end replaced by an update after the backward (and the gradient it
// sends) of every micro-batch that completes one. With W > 1 the update
// applies the stage's gradients summed over its W replicas; the sum, like
// the update, names that micro-batch. It is begun right after the backward
// and waited for at once: the next forward runs on the update's weights
// (PipeDream), or, under 2BW, a later sum would need the gradient buffer
// this one is still reading.
std::vector<Instruction> WithUpdates(const std::vector<Instruction>& flat,
                                     const Topology& topology) {
  std::vector<Instruction> out;
  for (size_t i = 0; i < flat.size(); ++i) {
    if (flat[i].op == OpKind::kOptimizerStep ||
        CollectiveOf(flat[i].op).has_value()) {
      continue;
    }
    const Instruction& inst = out.emplace_back(flat[i]);
    if (inst.op != OpKind::kBackward ||
        !topology.UpdatesAfter(inst.micro_batches[0])) {
      continue;
    }
    const Instruction backward = inst;
    if (i + 1 < flat.size() && flat[i + 1].op == OpKind::kSendGrad) {
      out.push_back(flat[++i]);
    }
    if (topology.width > 1) {
      for (OpKind sum : {OpKind::kAllreduceBegin, OpKind::kAllreduceEnd}) {
        Instruction& collective = out.emplace_back();
        collective.op = sum;
        collective.chunk = backward.chunk;
        collective.stage = backward.stage;
        collective.micro_batches = backward.micro_batches;
      }
    }
    Instruction& update = out.emplace_back();
    update.op = OpKind::kOptimizerStep;
    update.micro_batches = backward.micro_batches;
  }
  return out;
}

// Where step `step` starts in a flat program: right after the forward of
// the previous step's last micro-batch and the send of its output.
size_t StepStart(const std::vector<Instruction>& program, int step,
                 int micro_batches) {
  if (step == 0) return 0;
  const int last_of_previous = step * micro_batches - 1;
  for (size_t i = 0; i < program.size(); ++i) {
    if (program[i].op != OpKind::kForward ||
        program[i].micro_batches[0] != last_of_previous) {
      continue;
    }
    if (i + 1 < program.size() && program[i + 1].op == OpKind::kSendAct) ++i;
    return i + 1;
  }
  return program.size();
}

// Step `step` of a flat program, its micro-batches numbered from the step's
// first (the previous step's are negative).
std::vector<Instruction> StepOf(const std::vector<Instruction>& program,
                                int step, int micro_batches) {
  std::vector<Instruction> out(
      program.begin() + StepStart(program, step, micro_batches),
      program.begin() + StepStart(program, step + 1, micro_batches));
  for (Instruction& inst : out) {
    for (int& mb : inst.micro_batches) mb -= step * micro_batches;
  }
  return out;
}

absl::StatusOr<Schedule> Asynchronous(const ScheduleParams& params,
                                      UpdateRule rule) {
  const int n = params.micro_batches;
  ScheduleParams flat_params = params;
  flat_params.scheme = Scheme::kOneFOneB;
  flat_params.policy = WarmupPolicy::kPa;
  flat_params.micro_batches = kFlatSteps * n;
  ASSIGN_OR_RETURN(Schedule flat, GenerateOneFOneB(flat_params));
  flat.topology.update_rule = rule;
  flat.topology.steps = kFlatSteps;
  Schedule out;
  out.topology = flat.topology;
  out.topology.micro_batches = n;
  out.topology.steps = 1;
  out.topology.repeating = true;
  for (const WorkerProgram& worker : flat.workers) {
    const std::vector<Instruction> program =
        WithUpdates(worker.instructions, flat.topology);
    std::vector<Instruction> step = StepOf(program, 1, n);
    if (step != StepOf(program, 2, n)) {
      return absl::InternalError(absl::StrCat(
          SchemeName(params.scheme), " D = ", params.depth, ", N = ", n,
          ": rank ", worker.rank, "'s steps 1 and 2 of the flat order differ"));
    }
    out.workers.push_back({worker.rank, worker.stages, std::move(step)});
  }
  return out;
}

}  // namespace

absl::StatusOr<Schedule> GeneratePipeDream(const ScheduleParams& params) {
  return Asynchronous(params, UpdateRule::kStashed);
}

absl::StatusOr<Schedule> GeneratePipeDream2Bw(const ScheduleParams& params) {
  return Asynchronous(params, UpdateRule::kDoubleBuffered);
}

}  // namespace chimera::schedule
