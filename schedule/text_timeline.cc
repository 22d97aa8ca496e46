#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "schedule/timeline.h"

namespace chimera::schedule {
namespace {

std::string Label(const Instruction& inst) {
  const bool up = inst.chunk % 2 == 1;
  char letter = ComputeLetter(inst.op);
  if (up) letter = static_cast<char>(letter - 'A' + 'a');
  return absl::StrCat(std::string(1, letter),
                      absl::StrJoin(inst.micro_batches, "+"));
}

// A column's span of time and width in characters: one column per shortest
// compute op (coarser if that would be too wide), wide enough for every
// label.
struct Columns {
  double quantum = 0;
  size_t label_width = 1;
};

Columns ColumnsFor(const Schedule& schedule, const SimulationResult& result) {
  Columns columns;
  for (size_t r = 0; r < schedule.workers.size(); ++r) {
    const auto& program = schedule.workers[r].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      if (!IsCompute(program[i].op)) continue;
      const InstructionTiming& t = result.workers[r].timings[i];
      if (t.end > t.start &&
          (columns.quantum == 0 || t.end - t.start < columns.quantum)) {
        columns.quantum = t.end - t.start;
      }
      columns.label_width =
          std::max(columns.label_width, Label(program[i]).size());
    }
  }
  if (columns.quantum > 0 && result.makespan > 0) {
    columns.quantum =
        std::max(columns.quantum, result.makespan / kMaxTimelineCells);
  }
  return columns;
}

// Worker `r`'s row of `cells` columns.
std::string Row(const Schedule& schedule, const SimulationResult& result,
                size_t r, const Columns& columns, int cells) {
  std::vector<std::string> row(cells, std::string(columns.label_width, '.'));
  const auto& program = schedule.workers[r].instructions;
  for (size_t i = 0; i < program.size(); ++i) {
    if (!IsCompute(program[i].op)) continue;
    const InstructionTiming& t = result.workers[r].timings[i];
    const int first =
        static_cast<int>(std::floor(t.start / columns.quantum + 1e-9));
    const int last = std::max(
        first, static_cast<int>(std::ceil(t.end / columns.quantum - 1e-9)) - 1);
    for (int c = first; c <= last && c < cells; ++c) {
      std::string label = c == first ? Label(program[i])
                                     : std::string(columns.label_width, '-');
      label.resize(columns.label_width, ' ');
      row[c] = label;
    }
  }
  return absl::StrCat(absl::StrFormat("P%-4d|", r), absl::StrJoin(row, " "),
                      "|\n");
}

}  // namespace

std::string TextTimeline(const Schedule& schedule,
                         const SimulationResult& result,
                         absl::string_view title, absl::string_view time_unit) {
  std::string out = absl::StrFormat(
      "%s\nmakespan %.3f  bubble ratio %.4f  critical path %d forwards + %d "
      "backwards  exposed allreduce %.3f\n\n",
      title, result.makespan, result.bubble_ratio, result.critical_forwards,
      result.critical_backwards, result.exposed_allreduce);
  absl::StrAppend(&out, absl::StrFormat("%6s %10s %10s %8s %10s %10s\n", "rank",
                                        "busy", "idle", "bubble", "peak_act",
                                        "exposed_ar"));
  for (const WorkerResult& w : result.workers) {
    absl::StrAppend(&out, absl::StrFormat("%6d %10.3f %10.3f %8.4f %10d %10.3f\n",
                                          w.rank, w.busy, w.idle, w.bubble_ratio,
                                          w.peak_activations,
                                          w.exposed_allreduce));
  }
  const Columns columns = ColumnsFor(schedule, result);
  if (columns.quantum <= 0 || result.makespan <= 0) return out;
  const int cells =
      static_cast<int>(std::ceil(result.makespan / columns.quantum - 1e-9));
  const auto chunks = ChunkNames(schedule.topology);
  std::vector<std::string> letters;
  std::vector<std::string> names;
  for (OpKind op : ComputeOpsOf(schedule)) {
    letters.emplace_back(1, ComputeLetter(op));
    names.push_back(OpLegendName(op));
  }
  const std::string upper = absl::StrJoin(letters, "/");
  absl::StrAppend(
      &out, "\ntimeline: one column = ", columns.quantum, " ", time_unit, "; ",
      upper, " ", absl::StrJoin(names, "/"),
      chunks ? absl::StrCat(" of the ", chunks->first, "s, ",
                            absl::AsciiStrToLower(upper), " of the ",
                            chunks->second, "s")
             : "",
      ", then the micro-batch; '.' idle\n");
  for (size_t r = 0; r < schedule.workers.size(); ++r) {
    absl::StrAppend(&out, Row(schedule, result, r, columns, cells));
  }
  return out;
}

std::string OpLegendName(OpKind op) {
  switch (op) {
    case OpKind::kForward:
      return "forward";
    case OpKind::kBackwardInput:
      return "backward's input half";
    case OpKind::kBackwardWeight:
      return "backward's weight half";
    default:
      return "backward";
  }
}

std::vector<OpKind> ComputeOpsOf(const Schedule& schedule) {
  std::vector<OpKind> ops;
  for (OpKind op : {OpKind::kForward, OpKind::kBackward,
                    OpKind::kBackwardInput, OpKind::kBackwardWeight}) {
    const bool present = std::any_of(
        schedule.workers.begin(), schedule.workers.end(),
        [op](const WorkerProgram& w) {
          return std::any_of(w.instructions.begin(), w.instructions.end(),
                             [op](const Instruction& i) { return i.op == op; });
        });
    if (present) ops.push_back(op);
  }
  return ops;
}

std::optional<std::pair<std::string, std::string>> ChunkNames(const Topology& topology) {
  if (topology.num_chunks < 2) return std::nullopt;
  if (topology.layout == ChunkLayout::kReplicas) {
    return std::make_pair("down pipeline", "up pipeline");
  }
  return std::make_pair("even chunk", "odd chunk");
}

}  // namespace chimera::schedule
