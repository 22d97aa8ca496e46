#include "schedule/csv_io.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "schedule/schedule_params.h"

namespace chimera::schedule {
namespace {

constexpr absl::string_view kMagic = "# chimera-schedule";
constexpr absl::string_view kHeader =
    "rank,op,chunk,stage,micro_batches,peer,part,num_parts,recompute";
// rank, op, chunk and stage, then micro_batches, peer, part, num_parts and
// recompute, which take their defaults when empty or left off.
constexpr size_t kRequiredFields = 4;
constexpr size_t kFields = 9;
constexpr int kMaxRanks = 1 << 16;

absl::Status LineError(int line, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat("csv line ", line, ": ", message));
}

absl::StatusOr<int> ParseInt(int line, absl::string_view field,
                             absl::string_view text, int fallback) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return fallback;
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return LineError(line, absl::StrCat(field, " '", text,
                                        "' is not an integer"));
  }
  return value;
}

absl::StatusOr<Topology> ParseTopology(absl::string_view text) {
  Topology topology;
  for (absl::string_view item :
       absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.first == "layout") {
      ASSIGN_OR_RETURN(topology.layout, ParseChunkLayout(kv.second));
      continue;
    }
    if (kv.first == "updates") {
      absl::StatusOr<UpdateRule> rule = ParseUpdateRule(kv.second);
      if (!rule.ok()) return LineError(1, rule.status().message());
      topology.update_rule = *rule;
      topology.repeating = topology.Asynchronous();
      continue;
    }
    if (kv.first == "replication") {
      absl::StatusOr<std::vector<int>> replication =
          ParseReplication(kv.second);
      if (!replication.ok())
        return LineError(1, replication.status().message());
      topology.replication = *std::move(replication);
      continue;
    }
    int* field = kv.first == "depth"           ? &topology.depth
                 : kv.first == "width"         ? &topology.width
                 : kv.first == "micro_batches" ? &topology.micro_batches
                 : kv.first == "chunks"        ? &topology.num_chunks
                                               : nullptr;
    if (field == nullptr) {
      return LineError(1, absl::StrCat("unknown key '", kv.first,
                                       "'; use depth, width, micro_batches, "
                                       "chunks, layout, updates, "
                                       "replication"));
    }
    ASSIGN_OR_RETURN(*field, ParseInt(1, kv.first, kv.second, 0));
    if (*field < 1) {
      return LineError(1, absl::StrCat(kv.first, " ", *field, " must be >= 1"));
    }
  }
  const std::string problem =
      ReplicationProblem(topology.replication, topology.depth);
  if (!problem.empty()) {
    return LineError(
        1, absl::StrCat("replication ", ReplicationName(topology.replication),
                        " ", problem));
  }
  // In 64 bits: the header may give any sizes.
  const int64_t ranks = int64_t{topology.width} * topology.WorkersPerPipeline();
  if (ranks > kMaxRanks) {
    return LineError(
        1, absl::StrCat(
               "width x ",
               topology.replication.empty() ? "depth" : "ranks per pipeline",
               " = ", ranks, " exceeds ", kMaxRanks, " ranks"));
  }
  return topology;
}

// The fields of an instruction row after its rank, chunk and stage.
absl::StatusOr<Instruction> ParseInstruction(
    int line, absl::string_view op_name,
    const std::vector<absl::string_view>& f) {
  Instruction inst;
  absl::StatusOr<OpKind> op = ParseOpName(op_name);
  if (!op.ok()) return LineError(line, op.status().message());
  inst.op = *op;
  absl::string_view mbs = absl::StripAsciiWhitespace(f[4]);
  if (!mbs.empty()) {
    for (absl::string_view mb : absl::StrSplit(mbs, '+')) {
      ASSIGN_OR_RETURN(int value, ParseInt(line, "micro_batches", mb, 0));
      inst.micro_batches.push_back(value);
    }
  }
  ASSIGN_OR_RETURN(inst.peer, ParseInt(line, "peer", f[5], -1));
  ASSIGN_OR_RETURN(inst.part, ParseInt(line, "part", f[6], 0));
  ASSIGN_OR_RETURN(inst.num_parts, ParseInt(line, "num_parts", f[7], 1));
  ASSIGN_OR_RETURN(int recompute, ParseInt(line, "recompute", f[8], 0));
  inst.recompute = recompute != 0;
  return inst;
}

// A STAGE row adds to its rank's held stages, any other to its program.
absl::Status ReadRow(int line, absl::string_view text, Schedule& schedule) {
  std::vector<absl::string_view> f = absl::StrSplit(text, ',');
  if (f.size() < kRequiredFields || f.size() > kFields) {
    return LineError(
        line,
        absl::StrCat("has ", f.size(), " fields, want ", kRequiredFields,
                     " to ", kFields, " (empty ones may be left off the end)"));
  }
  f.resize(kFields);  // The missing ones are empty: their defaults.
  ASSIGN_OR_RETURN(int rank, ParseInt(line, "rank", f[0], -1));
  if (rank < 0 || rank >= schedule.topology.NumWorkers()) {
    return LineError(line, absl::StrCat("rank ", rank, " outside [0, ",
                                        schedule.topology.NumWorkers(), ")"));
  }
  ASSIGN_OR_RETURN(int chunk, ParseInt(line, "chunk", f[2], 0));
  ASSIGN_OR_RETURN(int stage, ParseInt(line, "stage", f[3], 0));
  absl::string_view op_name = absl::StripAsciiWhitespace(f[1]);
  WorkerProgram& worker = schedule.workers[rank];
  if (op_name == "STAGE") {
    worker.stages.push_back({chunk, stage});
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Instruction inst, ParseInstruction(line, op_name, f));
  inst.chunk = chunk;
  inst.stage = stage;
  worker.instructions.push_back(std::move(inst));
  return absl::OkStatus();
}

// Fields that hold their defaults are left empty, and empty ones off the
// end: a large schedule's file is a quarter smaller.
void AppendInstructionRow(int rank, const Instruction& inst, std::string& out) {
  absl::StrAppend(&out, rank, ",", OpName(inst.op), ",", inst.chunk, ",",
                  inst.stage, ",", absl::StrJoin(inst.micro_batches, "+"), ",");
  if (inst.peer != -1) absl::StrAppend(&out, inst.peer);
  out += ',';
  if (inst.part != 0) absl::StrAppend(&out, inst.part);
  out += ',';
  if (inst.num_parts != 1) absl::StrAppend(&out, inst.num_parts);
  out += ',';
  if (inst.recompute) out += '1';
  // The stage is never empty, so this stops within the row.
  out.resize(out.find_last_not_of(',') + 1);
  out += '\n';
}

}  // namespace

std::string WriteScheduleCsv(const Schedule& schedule) {
  const Topology& t = schedule.topology;
  std::string out =
      absl::StrCat(kMagic, " depth=", t.depth, " width=", t.width,
                   " micro_batches=", t.micro_batches, " chunks=", t.num_chunks,
                   " layout=", ChunkLayoutName(t.layout));
  // An asynchronous schedule is written as its repeating step.
  if (t.Asynchronous()) {
    absl::StrAppend(&out, " updates=", UpdateRuleName(t.update_rule));
  }
  if (!t.replication.empty()) {
    absl::StrAppend(&out, " replication=", ReplicationName(t.replication));
  }
  absl::StrAppend(&out, "\n", kHeader, "\n");
  for (const WorkerProgram& w : schedule.workers) {
    for (const StageRef& ref : w.stages) {
      absl::StrAppend(&out, w.rank, ",STAGE,", ref.chunk, ",", ref.stage, "\n");
    }
    for (const Instruction& inst : w.instructions) {
      AppendInstructionRow(w.rank, inst, out);
    }
  }
  return out;
}

absl::StatusOr<Schedule> ReadScheduleCsv(absl::string_view csv) {
  std::vector<absl::string_view> lines = absl::StrSplit(csv, '\n');
  if (lines.empty() || !absl::ConsumePrefix(&lines[0], kMagic)) {
    return LineError(1, absl::StrCat("must start with '", kMagic,
                                     " depth=D width=W micro_batches=N "
                                     "chunks=C layout=replicas|chained'"));
  }
  Schedule schedule;
  ASSIGN_OR_RETURN(schedule.topology,
                   ParseTopology(absl::StripAsciiWhitespace(lines[0])));
  schedule.workers.resize(schedule.topology.NumWorkers());
  for (int r = 0; r < schedule.topology.NumWorkers(); ++r) {
    schedule.workers[r].rank = r;
  }
  bool header_seen = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const int line = static_cast<int>(i) + 1;
    absl::string_view text = absl::StripAsciiWhitespace(lines[i]);
    if (text.empty() || text[0] == '#') continue;
    if (!header_seen) {
      if (text != kHeader) {
        return LineError(line, absl::StrCat("expected the header '", kHeader, "'"));
      }
      header_seen = true;
      continue;
    }
    RETURN_IF_ERROR(ReadRow(line, text, schedule));
  }
  if (!header_seen) {
    return LineError(static_cast<int>(lines.size()),
                     absl::StrCat("missing the header '", kHeader, "'"));
  }
  return schedule;
}

}  // namespace chimera::schedule
