#include "client/schedule_command.h"

#include <malloc.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli_errors.h"
#include "client/exit_codes.h"
#include "client/planning_inputs.h"
#include "common/field_errors.h"
#include "common/file_reader.h"
#include "common/status_macros.h"
#include "planner/plan_evaluator.h"
#include "planner/plan_search.h"
#include "schedule/csv_io.h"
#include "schedule/generator.h"
#include "schedule/json_report.h"
#include "schedule/params_proto.h"
#include "schedule/simulator.h"
#include "schedule/step_unrolling.h"
#include "schedule/timeline.h"
#include "schedule/torch_csv.h"
#include "schedule/validator.h"

namespace chimera::client {
namespace {

using schedule::ScheduleParams;

// A hand-written schedule for thousands of workers stays far below this.
constexpr uint64_t kMaxScheduleCsvBytes = 64 << 20;

// Flags kept as typed, so errors can name the flag.
struct RawFlags {
  // -f: the job's own schedule, planned for --cluster (with --profile).
  std::string job_file;
  std::string cluster_file;
  std::string profile_file;
  std::string scheme = "1f1b";
  // The text of each knob set by name (--policy pb).
  std::map<schedule::ScheduleParam, std::string> names;
  std::string out;
};

// How this command names a parameter in its messages: by its flag.
std::string FlagName(schedule::ScheduleParam param) {
  return "--" + schedule::ScheduleParamName(param);
}

// One flag per knob of the schedule engine's table.
void AddKnobFlags(CLI::App& cmd, ScheduleParams& p, RawFlags& raw) {
  for (const schedule::Knob& knob : schedule::kKnobs) {
    const std::string flag = FlagName(knob.param);
    CLI::Option* option;
    if (knob.names != nullptr) {
      std::string& name = raw.names[knob.param];
      name = knob.names->name(p);
      option = cmd.add_option(
          flag, name, absl::StrCat(knob.help, ": ", knob.names->names()));
    } else {
      option = cmd.add_option(flag, p.*knob.number, std::string(knob.help));
    }
    option->capture_default_str();
  }
}

// The flags given on the command line as a job's parallelism, read by the
// schedule engine's one translation, so a knob a job file refuses (--policy
// for chimera) is refused here too. Knobs left out stay unset so the
// engine's defaults apply.
absl::StatusOr<chimera::v1::ParallelismSpec> GivenParallelism(
    const CLI::App& cmd, const RawFlags& raw, ScheduleParams p) {
  chimera::v1::ParallelismSpec spec;
  spec.set_schedule(raw.scheme);
  spec.set_pipeline(p.depth);
  spec.set_data(p.width);
  spec.set_micro_batches(p.micro_batches);
  for (const schedule::Knob& knob : schedule::kKnobs) {
    const std::string flag = FlagName(knob.param);
    if (cmd.count(flag) == 0) continue;
    if (knob.names != nullptr) {
      absl::Status parsed = knob.names->parse(raw.names.at(knob.param), p);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, ": ", parsed.message()));
      }
    }
    schedule::SetSpecKnob(knob, p, &spec);
  }
  return spec;
}

std::string Title(const ScheduleCommandOptions& options) {
  if (!options.from_csv.empty()) return options.from_csv;
  if (!options.from_torch_csv.empty()) return options.from_torch_csv;
  const ScheduleParams& p = options.params;
  std::string title = absl::StrCat(schedule::SchemeName(p.scheme),
                                   " D=", p.depth, " N=", p.micro_batches);
  if (p.width > 1) absl::StrAppend(&title, " W=", p.width);
  if (schedule::KnobApplies(schedule::ScheduleParam::kPipelines, p.scheme)) {
    absl::StrAppend(&title, " pipelines=", p.pipelines);
    if (schedule::KnobApplies(schedule::ScheduleParam::kConcat, p.scheme) &&
        p.micro_batches > p.depth) {
      absl::StrAppend(&title, " concat=", schedule::ConcatName(p.concat));
    }
  }
  if (p.scheme == schedule::Scheme::kInterleaved ||
      p.scheme == schedule::Scheme::kBreadthFirst) {
    absl::StrAppend(&title, " v=", p.chunks);
  }
  if (p.scheme == schedule::Scheme::kMixPipe) {
    absl::StrAppend(&title, " K=", p.mixpipe_k, " Gamma=", p.mixpipe_gamma);
  }
  if (p.scheme == schedule::Scheme::kZbAuto && p.activation_limit > 0) {
    absl::StrAppend(&title, " activation-limit=", p.activation_limit);
  }
  if (!p.replication.empty()) {
    const int slices = schedule::SlicesPerMicroBatch(p.replication);
    absl::StrAppend(
        &title, " replication=", schedule::ReplicationName(p.replication), " (",
        slices, " slices per micro-batch: op j is slice j mod ", slices,
        " of micro-batch j / ", slices, ")");
  }
  return title;
}

absl::Status CheckOutput(const std::string& output) {
  const std::vector<std::string> outputs = {"text", "json", "svg", "csv",
                                            "torch-csv"};
  if (std::find(outputs.begin(), outputs.end(), output) != outputs.end()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "-o: '", output, "' is not one of ", absl::StrJoin(outputs, ", ")));
}

// A simulated output (text, JSON or SVG) of SCHEDULE under COSTS (in
// TIME_UNIT), titled TITLE; SCHEME names it in the JSON report.
absl::StatusOr<std::string> RenderRun(const schedule::Schedule& schedule,
                                      const schedule::CostModel& costs,
                                      absl::string_view time_unit,
                                      const std::string& output,
                                      const std::string& title,
                                      const std::string& scheme) {
  ASSIGN_OR_RETURN(schedule::SimulationResult result,
                   schedule::Simulate(schedule, costs));
  if (output == "json") return schedule::JsonReport(schedule, result, scheme);
  if (output == "svg") return schedule::SvgTimeline(schedule, result, title);
  return schedule::TextTimeline(schedule, result, title, time_unit);
}

// SCHEDULE as OUTPUT: its CSV, or its simulation (RenderRun). An
// asynchronous schedule's repeating step is simulated as the run of
// kDrawnSteps steps and the drain it makes (the overlap of one step with the
// next is the point), titled with its step once the pipeline is full.
absl::StatusOr<std::string> Render(const schedule::Schedule& schedule,
                                   const schedule::CostModel& costs,
                                   absl::string_view time_unit,
                                   const std::string& output,
                                   const std::string& title,
                                   const std::string& scheme) {
  if (output == "csv") return schedule::WriteScheduleCsv(schedule);
  if (output == "torch-csv") return schedule::WriteTorchScheduleCsv(schedule);
  if (!schedule.topology.repeating) {
    return RenderRun(schedule, costs, time_unit, output, title, scheme);
  }
  constexpr int kDrawnSteps = 2;
  ASSIGN_OR_RETURN(const schedule::SteadyStep steady,
                   schedule::SimulateSteadyStep(schedule, costs));
  ASSIGN_OR_RETURN(const schedule::Schedule steps,
                   schedule::UnrollSteps(schedule, kDrawnSteps));
  const std::string steps_title = absl::StrFormat(
      "%s, asynchronous (%s weights): %d steps and the drain, micro-batch j "
      "of step s drawn as s x %d + j; once the pipeline is full a step takes "
      "%.4g %s, bubble %.1f%%",
      title, schedule::UpdateRuleName(schedule.topology.update_rule),
      kDrawnSteps, schedule.topology.micro_batches, steady.seconds, time_unit,
      100.0 * steady.bubble_ratio);
  return RenderRun(steps, costs, time_unit, output, steps_title, scheme);
}

bool HasSplitBackward(const schedule::Schedule& schedule) {
  for (const schedule::WorkerProgram& w : schedule.workers) {
    for (const schedule::Instruction& inst : w.instructions) {
      if (inst.op == schedule::OpKind::kBackwardInput) return true;
    }
  }
  return false;
}

// --backward-input-cost and --backward-weight-cost, as CostModel takes them
// (negative: half the backward); refused for a schedule without split
// backwards, where they would silently do nothing.
absl::StatusOr<std::pair<double, double>> HalfCosts(
    const ScheduleCommandOptions& options, const schedule::Schedule& schedule) {
  const bool split = HasSplitBackward(schedule);
  for (const auto& [flag, cost] :
       {std::pair("--backward-input-cost", options.backward_input_cost),
        std::pair("--backward-weight-cost", options.backward_weight_cost)}) {
    if (cost < 0) continue;
    if (!split) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": this schedule's backwards are not split (schemes with "
                "split backwards: ",
          schedule::SplitBackwardSchemeNames(), "); use --backward-cost"));
    }
    if (!(cost > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", cost, " must be > 0"));
    }
  }
  return std::pair(options.backward_input_cost, options.backward_weight_cost);
}

// The schedule of --from-csv or --from-torch-csv; errors name the file.
absl::StatusOr<schedule::Schedule> LoadScheduleFile(
    const ScheduleCommandOptions& options) {
  const bool torch = !options.from_torch_csv.empty();
  const std::string& file = torch ? options.from_torch_csv : options.from_csv;
  absl::StatusOr<std::string> csv = ReadTextFile(file, kMaxScheduleCsvBytes);
  if (!csv.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(torch ? "--from-torch-csv: " : "--from-csv: ",
                     csv.status().message()));
  }
  absl::StatusOr<schedule::Schedule> loaded =
      torch ? schedule::ReadTorchScheduleCsv(*csv)
            : schedule::ReadScheduleCsv(*csv);
  if (!loaded.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": ", loaded.status().message()));
  }
  return loaded;
}

// --backward-cost, or else the halves' costs where either is given (a half
// not given costs a forward, half the default backward), so that a schedule
// running whole and split backwards (dualpipev) times both alike; else
// twice the forward.
double WholeBackwardCost(const ScheduleCommandOptions& options) {
  if (options.backward_cost >= 0) return options.backward_cost;
  if (options.backward_input_cost < 0 && options.backward_weight_cost < 0) {
    return 2 * options.forward_cost;
  }
  const auto half = [&options](double cost) {
    return cost < 0 ? options.forward_cost : cost;
  };
  return half(options.backward_input_cost) + half(options.backward_weight_cost);
}

// The flags that describe a schedule by hand, which -f takes from the job.
std::vector<std::string> HandScheduleFlags() {
  std::vector<std::string> flags = {
      "--scheme",    "--depth",        "--micro-batches", "--width",
      "--recompute", "--forward-cost", "--backward-cost",
      "--backward-input-cost", "--backward-weight-cost", "--from-csv",
      "--from-torch-csv"};
  for (const schedule::Knob& knob : schedule::kKnobs) {
    flags.push_back(FlagName(knob.param));
  }
  return flags;
}

// -f: the plan the planner picks for the job on the cluster (what the job
// fixes kept, the rest searched: `chimera plan`'s first row), drawn with the
// costs its prediction comes from. The simulation holds two data-parallel
// replicas at most; the others only enlarge the allreduce groups.
absl::StatusOr<std::string> PlannedSchedule(const PlanningInputs& inputs,
                                            const std::string& output) {
  ASSIGN_OR_RETURN(const planner::SearchResult searched,
                   planner::SearchPlans(inputs.job, inputs.cluster,
                                        inputs.profile, {.top_k = 1}));
  const chimera::v1::Plan& plan = searched.ranked.front().plan;
  const planner::PlanningContext context{inputs.job, inputs.cluster.spec(),
                                         inputs.profile};
  ASSIGN_OR_RETURN(const planner::Candidate candidate,
                   planner::CandidateOf(plan));
  ASSIGN_OR_RETURN(const planner::SimulationInputs simulation,
                   planner::PrepareSimulation(context, candidate));
  std::string title = absl::StrFormat(
      "%s: %s on %s, predicted step %.4g s, bubble %.3f",
      inputs.job.metadata().name(), planner::DescribePlan(plan),
      inputs.cluster.metadata().name(), plan.prediction().iteration_seconds(),
      plan.prediction().bubble_ratio());
  const int drawn = static_cast<int>(simulation.program.workers.size()) /
                    simulation.program.topology.WorkersPerPipeline();
  if (drawn < plan.width()) {
    absl::StrAppend(&title, " (", drawn, " of ", plan.width(),
                    " data-parallel replicas drawn)");
  }
  return Render(simulation.program, simulation.costs, "s", output, title,
                plan.scheme());
}

// Generation, validation, simulation and writing each build and drop tens of
// megabytes at D = 64, N = 512. glibc hands large blocks back to the kernel
// when they are freed, and the next stage then faults every page in afresh:
// a third of the command's time. Kept in the heap, they are reused (the peak
// is the same).
void KeepFreedMemoryForReuse() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace

absl::StatusOr<std::string> RunScheduleCommand(
    const ScheduleCommandOptions& options) {
  if (!(options.forward_cost > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--forward-cost: ", options.forward_cost, " must be > 0"));
  }
  const double backward = WholeBackwardCost(options);
  if (!(backward > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--backward-cost: ", backward, " must be > 0"));
  }
  RETURN_IF_ERROR(CheckOutput(options.output));

  if (!options.from_csv.empty() && !options.from_torch_csv.empty()) {
    return absl::InvalidArgumentError(
        "--from-csv and --from-torch-csv: load one schedule");
  }
  schedule::Schedule generated;
  if (!options.from_csv.empty() || !options.from_torch_csv.empty()) {
    ASSIGN_OR_RETURN(generated, LoadScheduleFile(options));
  } else {
    ScheduleParams params = options.params;
    // Order ops for the given cost ratio (the simulator times them).
    params.backward_slots = std::clamp(
        static_cast<int>(std::lround(backward / options.forward_cost)), 1, 8);
    std::vector<schedule::ScheduleParamError> errors =
        schedule::ValidateScheduleParams(params);
    if (!errors.empty()) {
      return absl::InvalidArgumentError(
          schedule::DescribeScheduleParamErrors(errors, FlagName));
    }
    ASSIGN_OR_RETURN(generated, schedule::GenerateSchedule(params));
  }
  absl::Status valid = schedule::ValidateSchedule(generated);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule is not valid: ", valid.message()));
  }
  // The costs are per micro-batch; with replicated stages every op runs on
  // a slice of one.
  const double slice = 1.0 / generated.topology.SlicesPerMicroBatch();
  schedule::CostModel costs;
  costs.forward = options.forward_cost * slice;
  costs.backward = backward * slice;
  ASSIGN_OR_RETURN(const auto halves, HalfCosts(options, generated));
  // A negative half (the default) stays negative: half the backward.
  costs.backward_input = halves.first * slice;
  costs.backward_weight = halves.second * slice;
  return Render(generated, costs, "time units", options.output,
                Title(options),
                options.from_csv.empty() && options.from_torch_csv.empty()
                    ? schedule::SchemeName(options.params.scheme)
                    : "");
}

void AddScheduleCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "schedule",
      "Generate, validate, simulate and draw a pipeline schedule (offline)");
  auto options = std::make_shared<ScheduleCommandOptions>();
  auto raw = std::make_shared<RawFlags>();
  ScheduleParams& p = options->params;
  cmd->add_option("--scheme", raw->scheme,
                  "Schedule: " + schedule::SchemeNames())
      ->capture_default_str();
  cmd->add_option("--depth", p.depth, "Pipeline depth D (stages)")
      ->capture_default_str();
  cmd->add_option("--micro-batches", p.micro_batches,
                  "Micro-batches N per iteration and pipeline replica")
      ->capture_default_str();
  cmd->add_option("--width", p.width, "Data-parallel width W")
      ->capture_default_str();
  AddKnobFlags(*cmd, p, *raw);
  cmd->add_flag("--recompute", p.recompute,
                "Recompute activations in backward");
  cmd->add_option("--forward-cost", options->forward_cost,
                  "Forward time per stage and micro-batch")
      ->capture_default_str();
  cmd->add_option(
      "--backward-cost", options->backward_cost,
      "Backward time per stage and micro-batch (default: the split "
      "costs' sum where given, else 2x forward)");
  const std::string split = schedule::SplitBackwardSchemeNames();
  cmd->add_option("--backward-input-cost", options->backward_input_cost,
                  absl::StrCat("Split backwards (", split,
                               "): time of a backward's input half, "
                               "BACKWARD_INPUT (default half the backward)"));
  cmd->add_option("--backward-weight-cost", options->backward_weight_cost,
                  absl::StrCat("Split backwards (", split,
                               "): time of a backward's weight half, "
                               "BACKWARD_WEIGHT (default half the backward)"));
  cmd->add_option("-o,--output", options->output,
                  "text, json, svg, csv (ours, which --from-csv reads) or "
                  "torch-csv (torch.distributed.pipelining's actions, which "
                  "--from-torch-csv reads)")
      ->capture_default_str();
  cmd->add_option("--out", raw->out, "Write to this file instead of stdout");
  cmd->add_option("--from-csv", options->from_csv,
                  "Load, validate and simulate a hand-written CSV schedule");
  cmd->add_option("--from-torch-csv", options->from_torch_csv,
                  "Load, validate and simulate a schedule in "
                  "torch.distributed.pipelining's CSV (a row of actions such "
                  "as 0F0,0I0,0W0 per rank, as TorchTitan reads)");
  cmd->add_option("-f,--file", raw->job_file,
                  "Draw this job's own schedule: the plan `chimera plan` "
                  "ranks first for it on --cluster, with the costs its "
                  "prediction comes from (instead of the flags above)");
  cmd->add_option("--cluster", raw->cluster_file,
                  "Cluster file the job's plan is for (with -f)");
  cmd->add_option("--profile", raw->profile_file,
                  "Measured model profile (with -f); default: the analytic "
                  "transformer model");

  cmd->callback([cmd, options, raw]() {
    KeepFreedMemoryForReuse();
    auto fail = [](absl::string_view message) {
      std::cerr << "chimera schedule: " << message << "\n";
      throw CLI::RuntimeError(kExitUsage);
    };
    absl::StatusOr<std::string> output;
    if (!raw->job_file.empty()) {
      for (const std::string& flag : HandScheduleFlags()) {
        if (cmd->count(flag) > 0) {
          fail(absl::StrCat(flag, " describes a schedule by hand; with -f ",
                            "the job file says what runs"));
        }
      }
      if (raw->cluster_file.empty()) {
        fail(
            "-f needs --cluster: the plan and its costs depend on the "
            "devices and links it runs on");
      }
      const absl::Status valid_output = CheckOutput(options->output);
      if (!valid_output.ok()) fail(valid_output.message());
      output =
          PlannedSchedule(LoadPlanningInputs(raw->job_file, raw->cluster_file,
                                             raw->profile_file),
                          options->output);
      // Nothing fitting the cluster is a failed search, not bad input.
      if (!output.ok()) ExitWithError(output.status());
    } else {
      if (!raw->cluster_file.empty() || !raw->profile_file.empty()) {
        fail("--cluster and --profile plan a job: name its file with -f");
      }
      if (options->from_csv.empty() && options->from_torch_csv.empty()) {
        chimera::v1::TrainingSpec training;
        training.set_recompute(options->params.recompute);
        absl::StatusOr<chimera::v1::ParallelismSpec> given =
            GivenParallelism(*cmd, *raw, options->params);
        if (!given.ok()) fail(given.status().message());
        schedule::SpecParams fixed;
        const FieldErrors errors = schedule::ScheduleParamsFromSpec(
            *given, training, &fixed, FlagName);
        if (!errors.empty()) {
          fail(absl::StrJoin(errors.errors(), "; ",
                             [](std::string* out, const FieldError& e) {
                               out->append(e.ToString());
                             }));
        }
        options->params = fixed.params;
      }
      output = RunScheduleCommand(*options);
      if (!output.ok()) fail(output.status().message());
    }
    if (raw->out.empty()) {
      std::cout << *output;
      return;
    }
    std::ofstream file(raw->out);
    if (!(file << *output))
      fail(absl::StrCat("--out: cannot write '", raw->out, "'"));
  });
}

}  // namespace chimera::client
