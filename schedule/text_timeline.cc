#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "schedule/timeline.h"

namespace chimera::schedule {
namespace {

std::string Label(const Instruction& inst) {
  const bool up = inst.chunk % 2 == 1;
  char letter = inst.op == OpKind::kForward ? 'F' : 'B';
  if (up) letter = static_cast<char>(letter - 'A' + 'a');
  return absl::StrCat(std::string(1, letter),
                      absl::StrJoin(inst.micro_batches, "+"));
}

}  // namespace

std::string TextTimeline(const Schedule& schedule,
                         const SimulationResult& result,
                         absl::string_view title) {
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
  // One cell per shortest compute op, coarser if that would be too wide.
  double quantum = 0;
  size_t label_width = 1;
  for (size_t r = 0; r < schedule.workers.size(); ++r) {
    const auto& program = schedule.workers[r].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      if (!IsCompute(program[i].op)) continue;
      const InstructionTiming& t = result.workers[r].timings[i];
      if (t.end > t.start && (quantum == 0 || t.end - t.start < quantum)) {
        quantum = t.end - t.start;
      }
      label_width = std::max(label_width, Label(program[i]).size());
    }
  }
  if (quantum <= 0 || result.makespan <= 0) return out;
  quantum = std::max(quantum, result.makespan / kMaxTimelineCells);
  const int cells = static_cast<int>(std::ceil(result.makespan / quantum - 1e-9));
  absl::StrAppend(&out, "\ntimeline: one column = ", quantum,
                  " time units; F/B forward/backward of the down pipeline "
                  "(even chunks), f/b of the up pipeline (odd chunks), then the "
                  "micro-batch; '.' idle\n");
  const std::string idle = std::string(label_width, '.');
  for (size_t r = 0; r < schedule.workers.size(); ++r) {
    std::vector<std::string> row(cells, idle);
    const auto& program = schedule.workers[r].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      if (!IsCompute(program[i].op)) continue;
      const InstructionTiming& t = result.workers[r].timings[i];
      const int first = static_cast<int>(std::floor(t.start / quantum + 1e-9));
      const int last = std::max(
          first, static_cast<int>(std::ceil(t.end / quantum - 1e-9)) - 1);
      for (int c = first; c <= last && c < cells; ++c) {
        std::string label = c == first ? Label(program[i])
                                       : std::string(label_width, '-');
        label.resize(label_width, ' ');
        row[c] = label;
      }
    }
    absl::StrAppend(&out, absl::StrFormat("P%-4d|", r), absl::StrJoin(row, " "),
                    "|\n");
  }
  return out;
}

}  // namespace chimera::schedule
