// The program validator on random programs: a generated schedule (scheme
// and parameters drawn from the input) must validate, and then a few random
// edits (an instruction dropped, repeated, moved or with a field changed)
// make the programs the validator must judge without crashing or hanging,
// whatever they are: unmatched messages, missing ops, deadlocks. One rank's
// share of the edited schedule then goes over the wire form a worker reads
// (program_proto.h), with a field of the outline or program changed: what
// it accepts must fit its topology.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "schedule/generator.h"
#include "schedule/program_proto.h"
#include "schedule/rank_schedule.h"
#include "schedule/validator.h"

namespace chimera::schedule {
namespace {

// Kept small: the validator's joint execution is linear in the ops, and a
// fuzzer wants many inputs a second.
ScheduleParams DrawParams(FuzzedDataProvider& input) {
  ScheduleParams params;
  params.scheme = static_cast<Scheme>(
      input.ConsumeIntegralInRange<int>(0, static_cast<int>(Scheme::kBreadthFirst)));
  params.depth = input.ConsumeIntegralInRange(1, 8);
  params.micro_batches = input.ConsumeIntegralInRange(1, 16);
  params.width = input.ConsumeIntegralInRange(1, 3);
  params.pipelines = 2 * input.ConsumeIntegralInRange(1, 2);
  params.concat = static_cast<Concat>(
      input.ConsumeIntegralInRange<int>(0, static_cast<int>(Concat::kBackwardHalving)));
  params.policy = input.ConsumeBool() ? WarmupPolicy::kPa : WarmupPolicy::kPb;
  params.sync = static_cast<Sync>(
      input.ConsumeIntegralInRange<int>(0, static_cast<int>(Sync::kEnd)));
  params.mixpipe_k = input.ConsumeIntegralInRange(1, 8);
  params.mixpipe_gamma = input.ConsumeIntegralInRange(0, 4);
  params.chunks = input.ConsumeIntegralInRange(1, 3);
  params.recompute = input.ConsumeBool();
  params.backward_slots = input.ConsumeIntegralInRange(1, 2);
  return params;
}

// Changes one field of `inst` to a value drawn near the valid range, or
// beyond it.
void EditField(FuzzedDataProvider& input, Instruction& inst) {
  switch (input.ConsumeIntegralInRange(0, 6)) {
    case 0:
      inst.op = static_cast<OpKind>(input.ConsumeIntegralInRange<int>(
          0, static_cast<int>(AllOpKinds().size()) - 1));
      break;
    case 1: inst.chunk = input.ConsumeIntegralInRange(-1, 4); break;
    case 2: inst.stage = input.ConsumeIntegralInRange(-1, 9); break;
    case 3: inst.peer = input.ConsumeIntegralInRange(-2, 30); break;
    case 4:
      inst.micro_batches = {input.ConsumeIntegralInRange(-1, 17)};
      if (input.ConsumeBool()) inst.micro_batches.push_back(input.ConsumeIntegralInRange(-1, 17));
      break;
    case 5:
      inst.num_parts = input.ConsumeIntegralInRange(0, 3);
      inst.part = input.ConsumeIntegralInRange(-1, 3);
      break;
    default: inst.recompute = !inst.recompute; break;
  }
}

void Edit(FuzzedDataProvider& input, Schedule& schedule) {
  WorkerProgram& worker =
      schedule.workers[input.ConsumeIntegralInRange<size_t>(0, schedule.workers.size() - 1)];
  std::vector<Instruction>& program = worker.instructions;
  if (program.empty()) return;
  const size_t at = input.ConsumeIntegralInRange<size_t>(0, program.size() - 1);
  switch (input.ConsumeIntegralInRange(0, 3)) {
    case 0: program.erase(program.begin() + at); break;
    case 1: program.insert(program.begin() + at, program[at]); break;
    case 2:
      std::swap(program[at],
                program[input.ConsumeIntegralInRange<size_t>(0, program.size() - 1)]);
      break;
    default: EditField(input, program[at]); break;
  }
}

// Changes one field of the outline or the program to a value near or beyond
// the valid range.
void EditWire(FuzzedDataProvider& input, chimera::v1::ScheduleOutline& outline,
              chimera::v1::WorkerProgram& program) {
  const int value = input.ConsumeIntegralInRange(-2, 12);
  switch (input.ConsumeIntegralInRange(0, 9)) {
    case 0: outline.set_depth(value); break;
    case 1: outline.set_num_chunks(value); break;
    case 2: outline.set_width(value); break;
    case 3: outline.set_micro_batches(value); break;
    case 4: outline.set_max_parts(value); break;
    case 5: outline.set_chunk_layout(input.ConsumeBool() ? "chained" : "x"); break;
    case 6:
      if (outline.ranks_size() > 0) outline.mutable_ranks()->RemoveLast();
      break;
    case 7:
      if (outline.ranks_size() > 0 && outline.ranks(0).stages_size() > 0) {
        outline.mutable_ranks(0)->mutable_stages(0)->set_stage(value);
      }
      break;
    case 8: program.set_rank(value); break;
    default:
      if (program.instructions_size() > 0) {
        program.mutable_instructions(0)->set_op(static_cast<chimera::v1::Op>(value));
      }
      break;
  }
}

// A share the wire form accepts refers only to ranks and stages its
// topology has.
void CheckWire(FuzzedDataProvider& input, const Schedule& schedule) {
  chimera::v1::ScheduleOutline outline = ToProto(OutlineOf(schedule));
  chimera::v1::WorkerProgram program = ToProto(schedule)[input.ConsumeIntegralInRange<size_t>(
      0, schedule.workers.size() - 1)];
  if (input.ConsumeBool()) EditWire(input, outline, program);
  const absl::StatusOr<RankSchedule> mine = RankScheduleFromProto(outline, program);
  if (!mine.ok()) return;
  const Topology& topology = mine->topology();
  if (mine->outline.world_size() != topology.NumWorkers() || mine->rank() < 0 ||
      mine->rank() >= topology.NumWorkers() || mine->outline.max_parts < 1) {
    std::abort();
  }
  for (const std::vector<StageRef>& stages : mine->outline.stages_by_rank) {
    for (const StageRef& ref : stages) {
      if (ref.chunk < 0 || ref.chunk >= topology.num_chunks || ref.stage < 0 ||
          ref.stage >= topology.depth) {
        std::abort();
      }
    }
  }
}

}  // namespace
}  // namespace chimera::schedule

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chimera::schedule;
  FuzzedDataProvider input(data, size);
  const ScheduleParams params = DrawParams(input);
  if (!ValidateScheduleParams(params).empty()) return 0;
  absl::StatusOr<Schedule> schedule = GenerateSchedule(params);
  // Parameters that validate generate a schedule that validates.
  if (!schedule.ok() || !ValidateSchedule(*schedule).ok()) std::abort();
  const int edits = input.ConsumeIntegralInRange(1, 4);
  for (int i = 0; i < edits; ++i) Edit(input, *schedule);
  ValidateSchedule(*schedule).IgnoreError();
  CheckWire(input, *schedule);
  return 0;
}
