#include "schedule/torch_csv.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "schedule/list_scheduler.h"
#include "schedule/program_builder.h"
#include "schedule/schedule_params.h"
#include "schedule/validator.h"

namespace chimera::schedule {
namespace {

// A cell's kind: a compute op, or (no op) an action our program builder
// places itself, which reading skips.
struct Kind {
  absl::string_view name;
  std::optional<OpKind> compute;
};
constexpr Kind kKinds[] = {
    {"F", OpKind::kForward},
    {"B", OpKind::kBackward},
    {"I", OpKind::kBackwardInput},
    {"W", OpKind::kBackwardWeight},
    {"SEND_F", std::nullopt},
    {"RECV_F", std::nullopt},
    {"SEND_B", std::nullopt},
    {"RECV_B", std::nullopt},
    {"UNSHARD", std::nullopt},
    {"RESHARD", std::nullopt},
    {"REDUCE_GRAD", std::nullopt},
};
constexpr absl::string_view kOverlapSuffix = ")OVERLAP_F_B";
constexpr absl::string_view kExample = "actions look like 0F0, 1I3, 2W0, 0B1";

// Where a cell is, 1-based as a spreadsheet shows it.
struct Cell {
  int row = 0;
  int column = 0;
};

absl::Status CellError(Cell cell, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat("row ", cell.row, ", column ", cell.column, ": ", message));
}

struct Action {
  OpKind op;
  int stage;
  int micro_batch;
  Cell cell;
};

// A non-negative number no larger than a schedule may hold, or -1.
int Number(absl::string_view digits) {
  int value = 0;
  if (digits.empty() || !absl::ascii_isdigit(digits[0]) ||
      !absl::SimpleAtoi(digits, &value) || value > kMaxScheduleSize) {
    return -1;
  }
  return value;
}

// One action "<stage><kind>[<micro-batch>]"; a compute action is appended.
absl::Status ParseAction(absl::string_view text, Cell cell,
                         std::vector<Action>& out) {
  size_t digits = 0;
  while (digits < text.size() && absl::ascii_isdigit(text[digits])) ++digits;
  const int stage = Number(text.substr(0, digits));
  if (stage < 0) {
    return CellError(cell, absl::StrCat("'", text, "' does not start with a ",
                                        "stage number up to ", kMaxScheduleSize,
                                        " (", kExample, ")"));
  }
  const absl::string_view rest = text.substr(digits);
  for (const Kind& kind : kKinds) {
    if (!absl::StartsWith(rest, kind.name)) continue;
    const absl::string_view tail = rest.substr(kind.name.size());
    if (!kind.compute && tail.empty()) return absl::OkStatus();
    const int micro_batch = Number(tail);
    if (micro_batch < 0) {
      return CellError(cell, absl::StrCat("'", text, "': the micro-batch after ",
                                          kind.name, " must be a number up to ",
                                          kMaxScheduleSize, " (", kExample, ")"));
    }
    if (kind.compute) out.push_back({*kind.compute, stage, micro_batch, cell});
    return absl::OkStatus();
  }
  return CellError(
      cell, absl::StrCat("'", text, "' is not an action: after the stage ",
                         "comes F, B, I or W and the micro-batch (", kExample,
                         "), or SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, ",
                         "RESHARD, REDUCE_GRAD"));
}

// A cell: empty (an idle step), one action, or an overlapped pair
// "(0F2;1B1)OVERLAP_F_B", whose actions run in their order.
absl::Status ParseCell(absl::string_view text, Cell cell,
                       std::vector<Action>& out) {
  text = absl::StripAsciiWhitespace(text);
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') {
    text = absl::StripAsciiWhitespace(text.substr(1, text.size() - 2));
  }
  if (text.empty()) return absl::OkStatus();
  if (!absl::ConsumePrefix(&text, "(")) return ParseAction(text, cell, out);
  if (!absl::ConsumeSuffix(&text, kOverlapSuffix)) {
    return CellError(cell, absl::StrCat("'(", text, "' opens a group that does ",
                                        "not end in '", kOverlapSuffix, "'"));
  }
  for (absl::string_view part : absl::StrSplit(text, ';')) {
    RETURN_IF_ERROR(
        ParseAction(absl::StripAsciiWhitespace(part), cell, out));
  }
  return absl::OkStatus();
}

// Every row's compute actions, in order; trailing blank lines are no rows.
absl::StatusOr<std::vector<std::vector<Action>>> ParseRows(
    absl::string_view csv) {
  std::vector<absl::string_view> lines = absl::StrSplit(csv, '\n');
  for (absl::string_view& line : lines) absl::ConsumeSuffix(&line, "\r");
  while (!lines.empty() && absl::StripAsciiWhitespace(lines.back()).empty()) {
    lines.pop_back();
  }
  if (lines.empty()) {
    return absl::InvalidArgumentError(
        "no rows: the file has one row of actions per pipeline rank");
  }
  if (lines.size() > static_cast<size_t>(kMaxScheduleSize)) {
    return absl::InvalidArgumentError(absl::StrCat(
        lines.size(), " rows: at most ", kMaxScheduleSize, " ranks"));
  }
  std::vector<std::vector<Action>> rows(lines.size());
  for (size_t r = 0; r < lines.size(); ++r) {
    int column = 0;
    for (absl::string_view text : absl::StrSplit(lines[r], ',')) {
      const Cell cell{static_cast<int>(r) + 1, ++column};
      RETURN_IF_ERROR(ParseCell(text, cell, rows[r]));
    }
  }
  return rows;
}

// The rows' stages as a topology of rows.size() positions: stage s is
// chunk s / R, stage s % R of a chained model, on the rank whose row names
// it.
struct Layout {
  Topology topology;
  Placement placement;
};

absl::StatusOr<Layout> PlaceStages(
    const std::vector<std::vector<Action>>& rows) {
  const int ranks = static_cast<int>(rows.size());
  int stages = 0;
  int micro_batches = 0;
  for (const std::vector<Action>& row : rows) {
    for (const Action& a : row) {
      stages = std::max(stages, a.stage + 1);
      micro_batches = std::max(micro_batches, a.micro_batch + 1);
    }
  }
  if (stages == 0) {
    return absl::InvalidArgumentError("no forward or backward in any row");
  }
  if (stages % ranks != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the rows name stages 0..", stages - 1, ", which ", ranks,
        " ranks (one per row) cannot hold evenly"));
  }
  std::vector<int> rank_of(stages, -1);
  for (int r = 0; r < ranks; ++r) {
    for (const Action& a : rows[r]) {
      if (rank_of[a.stage] >= 0 && rank_of[a.stage] != r) {
        return CellError(a.cell, absl::StrCat("stage ", a.stage, " is on rank ",
                                              rank_of[a.stage], " (row ",
                                              rank_of[a.stage] + 1,
                                              ") already; a stage runs on one "
                                              "rank"));
      }
      rank_of[a.stage] = r;
    }
  }
  Layout layout;
  layout.topology.depth = ranks;
  layout.topology.num_chunks = stages / ranks;
  layout.topology.layout = ChunkLayout::kChained;
  layout.topology.micro_batches = micro_batches;
  layout.placement.position.assign(layout.topology.num_chunks,
                                   std::vector<int>(ranks));
  std::vector<int> held(ranks, 0);
  for (int s = 0; s < stages; ++s) {
    if (rank_of[s] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", s, " appears in no row"));
    }
    layout.placement.position[s / ranks][s % ranks] = rank_of[s];
    ++held[rank_of[s]];
  }
  // Each rank holds one stage of every chunk: a row with fewer (an empty
  // one among them) leaves a rank idle and another holding two of a chunk.
  for (int r = 0; r < ranks; ++r) {
    if (held[r] != layout.topology.num_chunks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "row ", r + 1, " (rank ", r, ") runs ", held[r], " of the ", stages,
          " stages; each of the ", ranks, " rows must run ",
          layout.topology.num_chunks));
    }
  }
  return layout;
}

// Every (stage, micro-batch) has one forward and one backward, whole or in
// its two halves, each once.
absl::Status CheckCoverage(const std::vector<std::vector<Action>>& rows,
                           const Topology& topology) {
  const int stages = topology.NumModelStages();
  const int micro_batches = topology.micro_batches;
  // Per (stage, micro-batch): the cell of its F, B, I and W (row 0: none).
  absl::flat_hash_map<int64_t, std::array<Cell, 4>> seen;
  const auto slot = [](OpKind op) {
    switch (op) {
      case OpKind::kForward:
        return 0;
      case OpKind::kBackward:
        return 1;
      case OpKind::kBackwardInput:
        return 2;
      default:
        return 3;
    }
  };
  for (const std::vector<Action>& row : rows) {
    for (const Action& a : row) {
      Cell& cell = seen[int64_t{a.stage} * micro_batches + a.micro_batch][slot(a.op)];
      if (cell.row > 0) {
        return CellError(a.cell, absl::StrCat(OpName(a.op), " of stage ", a.stage,
                                              " micro-batch ", a.micro_batch,
                                              " again (first at row ", cell.row,
                                              ", column ", cell.column, ")"));
      }
      cell = a.cell;
    }
  }
  for (int s = 0; s < stages; ++s) {
    for (int m = 0; m < micro_batches; ++m) {
      const auto it = seen.find(int64_t{s} * micro_batches + m);
      const std::string what = absl::StrCat("stage ", s, " micro-batch ", m);
      if (it == seen.end() || it->second[0].row == 0) {
        return absl::InvalidArgumentError(absl::StrCat(what, " has no forward"));
      }
      const auto& [f, b, i, w] = it->second;
      if (b.row > 0 && (i.row > 0 || w.row > 0)) {
        return CellError(i.row > 0 ? i : w,
                         absl::StrCat(what, " has a whole backward (row ", b.row,
                                      ", column ", b.column, ") and a half"));
      }
      if (b.row == 0 && (i.row == 0 || w.row == 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, i.row > 0   ? " has its I but no W"
                  : w.row > 0 ? " has its W but no I"
                              : " has no backward (B, or I and W)"));
      }
    }
  }
  return absl::OkStatus();
}

// Why a schedule has no form in the format, or empty.
std::string Unwritable(const Schedule& schedule) {
  const Topology& t = schedule.topology;
  if (t.Asynchronous()) {
    return "it updates the weights without a flush (asynchronous); the "
           "format holds one flushed step";
  }
  if (!t.replication.empty()) {
    return "its stages run on several ranks each, on slices of every "
           "micro-batch (replication); the format runs each stage on one rank";
  }
  if (t.layout == ChunkLayout::kReplicas && t.num_chunks > 1) {
    return "its stages run as replicas on two or more ranks (down and up "
           "pipelines); the format runs each stage on one rank";
  }
  for (const WorkerProgram& worker : schedule.workers) {
    for (const Instruction& inst : worker.instructions) {
      if (!IsCompute(inst.op)) continue;
      if (inst.micro_batches.size() != 1) {
        return "a forward runs two micro-batches at once";
      }
      if (inst.num_parts != 1) return "a backward runs in parts";
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<std::string> WriteTorchScheduleCsv(const Schedule& schedule) {
  if (const std::string why = Unwritable(schedule); !why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "torch.distributed.pipelining's CSV cannot hold this schedule: ", why));
  }
  std::string csv;
  const int ranks = std::min<int>(schedule.topology.depth,
                                  static_cast<int>(schedule.workers.size()));
  for (int rank = 0; rank < ranks; ++rank) {
    std::vector<std::string> cells;
    for (const Instruction& inst : schedule.workers[rank].instructions) {
      if (!IsCompute(inst.op)) continue;
      cells.push_back(absl::StrCat(
          schedule.topology.ModelStage({inst.chunk, inst.stage}),
          std::string(1, ComputeLetter(inst.op)), inst.micro_batches[0]));
    }
    absl::StrAppend(&csv, absl::StrJoin(cells, ","), "\n");
  }
  return csv;
}

absl::StatusOr<Schedule> ReadTorchScheduleCsv(absl::string_view csv) {
  ASSIGN_OR_RETURN(const std::vector<std::vector<Action>> rows, ParseRows(csv));
  ASSIGN_OR_RETURN(const Layout layout, PlaceStages(rows));
  RETURN_IF_ERROR(CheckCoverage(rows, layout.topology));
  std::vector<std::vector<ComputeOp>> order(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    for (const Action& a : rows[r]) {
      ComputeOp& op = order[r].emplace_back();
      op.op = a.op;
      op.ref = {a.stage / layout.topology.depth, a.stage % layout.topology.depth};
      op.micro_batches = {a.micro_batch};
    }
  }
  absl::StatusOr<std::vector<std::vector<ComputeOp>>> timed =
      TimeFixedOrder(layout.topology, layout.placement, /*backward_slots=*/2,
                     order);
  if (!timed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the rows cannot run in this order: every rank's next action waits "
        "on an action that comes after it (",
        timed.status().message(), ")"));
  }
  ASSIGN_OR_RETURN(
      Schedule schedule,
      BuildPrograms(layout.topology, layout.placement, *timed,
                    {Sync::kEager, Sharding::kNone, /*replication=*/{}}));
  // An order that can run may still take a peer's transfers in another
  // order than the peer sends them (a backward of micro-batch 1 before 0's
  // on one rank, in order on the next): that is no schedule either.
  if (const absl::Status valid = ValidateSchedule(schedule); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the rows make no valid schedule: ", valid.message()));
  }
  return schedule;
}

}  // namespace chimera::schedule
