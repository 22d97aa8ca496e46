#include "client/job_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "planner/plan_evaluator.h"
#include "schedule/generator.h"
#include "schedule/measured_timeline.h"
#include "schedule/params_proto.h"
#include "schedule/simulator.h"
#include "schedule/timeline.h"

namespace chimera::client {
namespace {

// The one process of a Chrome trace: the job.
constexpr int kJobPid = 1;

// The plan's programs and every rank's instructions on one clock.
struct MeasuredStep {
  schedule::Schedule schedule;
  // Per rank, per instruction: seconds after the earliest rank's start.
  std::vector<std::vector<schedule::InstructionTiming>> spans;
  // Unix time of the earliest rank's start.
  double origin = 0;
};

absl::StatusOr<MeasuredStep> Measure(const chimera::v1::JobTrace& trace) {
  MeasuredStep measured;
  ASSIGN_OR_RETURN(schedule::ScheduleParams params,
                   schedule::ScheduleParamsOf(trace.plan()));
  ASSIGN_OR_RETURN(measured.schedule, schedule::GenerateSchedule(params));
  const auto& workers = measured.schedule.workers;
  if (trace.ranks_size() != static_cast<int>(workers.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the trace of job ", trace.job_id(), " has ", trace.ranks_size(),
        " ranks; its plan has ", workers.size()));
  }
  measured.origin = trace.ranks(0).timeline().start_time();
  for (const chimera::v1::RankTimeline& rank : trace.ranks()) {
    measured.origin = std::min(measured.origin, rank.timeline().start_time());
  }
  for (int r = 0; r < trace.ranks_size(); ++r) {
    const chimera::v1::RankTimeline& rank = trace.ranks(r);
    const chimera::v1::StepTimeline& timeline = rank.timeline();
    const size_t instructions = workers[r].instructions.size();
    if (rank.rank() != r ||
        timeline.op_start_seconds_size() != static_cast<int>(instructions) ||
        timeline.op_end_seconds_size() != static_cast<int>(instructions)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ranks[", r, "] (rank ", rank.rank(), ") has ",
                       timeline.op_start_seconds_size(), " op starts and ",
                       timeline.op_end_seconds_size(), " op ends; rank ", r,
                       "'s program has ", instructions, " instructions"));
    }
    const double offset = timeline.start_time() - measured.origin;
    std::vector<schedule::InstructionTiming>& spans =
        measured.spans.emplace_back();
    for (size_t i = 0; i < instructions; ++i) {
      spans.push_back({offset + timeline.op_start_seconds(i),
                       offset + timeline.op_end_seconds(i)});
    }
  }
  return measured;
}

// Nanoseconds on one grid: rounding is monotonic, so ops that follow each
// other on a rank still do.
int64_t Nanoseconds(double seconds) { return std::llround(seconds * 1e9); }

nlohmann::json InstructionArgs(const schedule::Topology& topology,
                               const schedule::Instruction& inst) {
  nlohmann::json args = {
      {"op", schedule::OpName(inst.op)},
      {"chunk", inst.chunk},
      {"stage", inst.stage},
      {"model_stage", topology.ModelStage({inst.chunk, inst.stage})},
      {"micro_batches",
       std::vector<int>(inst.micro_batches.begin(), inst.micro_batches.end())}};
  if (inst.peer >= 0) args["peer"] = inst.peer;
  if (inst.num_parts > 1) {
    args["part"] = absl::StrCat(inst.part, "/", inst.num_parts);
  }
  return args;
}

// "FORWARD 3", "BACKWARD 2+3", "ALLREDUCE_END stage 1".
std::string EventName(const schedule::Instruction& inst) {
  if (inst.micro_batches.empty()) {
    return absl::StrCat(schedule::OpName(inst.op), " stage ", inst.stage);
  }
  return absl::StrCat(
      schedule::OpName(inst.op), " ", absl::StrJoin(inst.micro_batches, "+"),
      inst.num_parts > 1
          ? absl::StrCat(" (", inst.part, "/", inst.num_parts, ")")
          : "");
}

std::string Title(const chimera::v1::JobTrace& trace) {
  return absl::StrCat("job ", trace.job_id(), " step ", trace.step(), ": ",
                      planner::DescribePlan(trace.plan()));
}

}  // namespace

std::string TraceFormatOf(absl::string_view path) {
  return absl::EndsWithIgnoreCase(path, ".svg") ? kSvgTraceFormat
                                                : kChromeTraceFormat;
}

absl::StatusOr<std::string> ChromeTrace(const chimera::v1::JobTrace& trace) {
  ASSIGN_OR_RETURN(MeasuredStep measured, Measure(trace));
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", kJobPid},
                    {"args", {{"name", Title(trace)}}}});
  const auto& workers = measured.schedule.workers;
  for (size_t r = 0; r < workers.size(); ++r) {
    const int tid = static_cast<int>(r);
    events.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", kJobPid},
         {"tid", tid},
         {"args",
          {{"name", absl::StrCat("rank ", r, " (worker ",
                                 trace.ranks(tid).worker_id(), ")")}}}});
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", kJobPid},
                      {"tid", tid},
                      {"args", {{"sort_index", tid}}}});
    for (size_t i = 0; i < workers[r].instructions.size(); ++i) {
      const schedule::Instruction& inst = workers[r].instructions[i];
      const int64_t start = Nanoseconds(measured.spans[r][i].start);
      const int64_t end = Nanoseconds(measured.spans[r][i].end);
      events.push_back(
          {{"name", EventName(inst)},
           {"cat", absl::AsciiStrToLower(schedule::OpName(inst.op))},
           {"ph", "X"},
           {"pid", kJobPid},
           {"tid", tid},
           {"ts", start / 1e3},
           {"dur", (end - start) / 1e3},
           {"args", InstructionArgs(measured.schedule.topology, inst)}});
    }
  }
  const nlohmann::json document = {
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"job_id", trace.job_id()},
        {"step", trace.step()},
        {"plan", planner::DescribePlan(trace.plan())},
        {"start_time", absl::StrFormat("%.6f", measured.origin)}}}};
  return document.dump() + "\n";
}

absl::StatusOr<std::string> TraceSvg(const chimera::v1::JobTrace& trace) {
  ASSIGN_OR_RETURN(MeasuredStep measured, Measure(trace));
  ASSIGN_OR_RETURN(schedule::SimulationResult on_workers,
                   schedule::MeasuredResult(measured.schedule, measured.spans));
  ASSIGN_OR_RETURN(schedule::SimulationResult simulated,
                   schedule::Simulate(
                       measured.schedule,
                       schedule::MeasuredCosts(measured.schedule, on_workers)));
  const std::string versus =
      simulated.makespan > 0
          ? absl::StrFormat(" (%.2fx the simulated makespan)",
                            on_workers.makespan / simulated.makespan)
          : "";
  return schedule::SvgTimelines(
      measured.schedule,
      {{absl::StrCat("measured on the workers", versus), &on_workers},
       {"simulated: the same programs with the measured mean op times and "
        "free communication",
        &simulated}},
      Title(trace), "seconds");
}

absl::Status CheckTracePath(const std::string& path) {
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  std::error_code error;
  if (!parent.empty() && !std::filesystem::is_directory(parent, error)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "': directory '", parent.string(), "' does not exist"));
  }
  return absl::OkStatus();
}

absl::Status WriteTraceFile(const chimera::v1::JobTrace& trace,
                            const std::string& path, absl::string_view format) {
  absl::StatusOr<std::string> text;
  if (format == kChromeTraceFormat) {
    text = ChromeTrace(trace);
  } else if (format == kSvgTraceFormat) {
    text = TraceSvg(trace);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("format: '", format, "' is not chrome or svg"));
  }
  RETURN_IF_ERROR(text.status());
  std::ofstream file(path, std::ios::binary);
  if (!(file << *text) || !file.flush()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write the trace to '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace chimera::client
