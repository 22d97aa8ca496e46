#include "client/job_output.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/text_table.h"
#include "common/byte_size.h"

namespace chimera::client {
namespace {

constexpr char kStatePrefix[] = "JOB_STATE_";

std::string FormatTime(double unix_seconds) {
  if (unix_seconds <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S",
                          absl::FromUnixMicros(unix_seconds * 1e6),
                          absl::LocalTimeZone());
}

std::string Steps(const chimera::v1::Job& job) {
  return absl::StrCat(job.status().completed_steps(), "/",
                      job.manifest().spec().training().max_steps());
}

// The plan's scheme, W and D; before the job starts, what it fixes of them.
std::string Layout(const chimera::v1::Job& job) {
  const auto& plan = job.plan();
  if (!plan.scheme().empty()) {
    return absl::StrCat(
        plan.scheme(), " W=", plan.width(), " D=", plan.depth(),
        plan.replication().empty()
            ? ""
            : absl::StrCat(" replication=", plan.replication()));
  }
  const auto& parallelism = job.manifest().spec().parallelism();
  std::vector<std::string> fixed;
  if (!parallelism.schedule().empty()) fixed.push_back(parallelism.schedule());
  if (parallelism.data() > 0) fixed.push_back(absl::StrCat("W=", parallelism.data()));
  if (parallelism.pipeline() > 0) fixed.push_back(absl::StrCat("D=", parallelism.pipeline()));
  if (fixed.empty()) return "(planned at start)";
  return absl::StrCat(absl::StrJoin(fixed, " "), " (the rest planned at start)");
}

// "step 7: FORWARD chunk=0 stage=1 mb=2 for 3.1 s (stopped)": where a busy
// worker's task was at its last heartbeat; "-" when unknown.
std::string FormatTaskPosition(const chimera::v1::WorkerInfo& worker) {
  if (!worker.has_task_position()) return "-";
  const chimera::v1::TaskPosition& position = worker.task_position();
  return absl::StrFormat("step %d: %s for %.1f s%s", position.step(),
                         position.op(), position.op_seconds(),
                         position.process_stopped() ? " (stopped)" : "");
}

}  // namespace

bool ParseJobState(const std::string& name, chimera::v1::JobState* state) {
  std::string upper = absl::AsciiStrToUpper(name);
  if (!absl::StartsWith(upper, kStatePrefix)) upper = kStatePrefix + upper;
  return chimera::v1::JobState_Parse(upper, state) &&
         *state != chimera::v1::JOB_STATE_UNSPECIFIED;
}

std::string FormatStep(const chimera::v1::StepSummary& step, int max_steps) {
  return absl::StrFormat(
      "step %d/%d  loss %.4f  samples/s %.1f  tokens/s %.0f  bubble %.3f  peak "
      "%s",
      step.step() + 1, max_steps, step.loss(), step.samples_per_second(),
      step.tokens_per_second(), step.bubble_ratio(),
      FormatBytes(step.peak_memory_bytes()));
}

std::string FormatJobTable(const std::vector<chimera::v1::Job>& jobs, bool wide) {
  std::vector<TextTable::Column> columns = {
      {"JOB"}, {"STATE"}, {"STEPS"}, {"PLAN"}, {"SUBMITTED"}};
  if (wide) {
    columns.insert(columns.end(),
                   {{"MICRO-BATCHES"}, {"LOSS", TextTable::kRight}, {"WORKERS"}, {"MESSAGE"}});
  }
  TextTable table(std::move(columns));
  for (const chimera::v1::Job& job : jobs) {
    std::vector<std::string> row = {job.id(), JobStateName(job.status().state()),
                                    Steps(job), Layout(job),
                                    FormatTime(job.status().submit_time())};
    if (wide) {
      const auto& plan = job.plan();
      std::vector<std::string> workers;
      for (const auto& worker : job.workers()) workers.push_back(worker.worker_id());
      row.insert(row.end(),
                 {plan.scheme().empty()
                      ? "-"
                      : absl::StrCat(plan.micro_batch_size(), "x", plan.micro_batches()),
                  job.status().completed_steps() > 0
                      ? absl::StrFormat("%.4f", job.status().last_step().loss())
                      : "-",
                  workers.empty() ? "-" : absl::StrJoin(workers, ","),
                  job.status().message().empty() ? "-" : job.status().message()});
    }
    table.AddRow(std::move(row));
  }
  return table.ToString();
}

std::string FormatJobStatus(const chimera::v1::Job& job) {
  std::string out =
      absl::StrCat("job:      ", job.id(),
                   "\nstate:    ", JobStateName(job.status().state()), "\n");
  if (!job.status().message().empty()) {
    absl::StrAppend(&out, "message:  ", job.status().message(), "\n");
  }
  absl::StrAppend(&out, "steps:    ", Steps(job), "\nplan:     ", Layout(job),
                  "\n");
  if (job.status().restarts() > 0) {
    absl::StrAppend(&out, "restarts: ", job.status().restarts());
    if (!job.status().restart_cause().empty()) {
      absl::StrAppend(&out, " (the last: ", job.status().restart_cause(), ")");
    }
    absl::StrAppend(&out, "\n");
  }
  if (job.status().stragglers_size() > 0) {
    std::vector<std::string> ranks;
    for (const auto& straggler : job.status().stragglers()) {
      ranks.push_back(absl::StrFormat(
          "rank %d on worker %s (%.1fx its peers' compute since step %d)",
          straggler.rank(), straggler.worker_id(), straggler.slowdown(),
          straggler.since_step()));
    }
    absl::StrAppend(&out, "stragglers: ", absl::StrJoin(ranks, ", "), "\n");
  }
  if (job.status().left_out_workers_size() > 0) {
    std::vector<std::string> hung;
    for (const auto& worker : job.status().left_out_workers()) {
      hung.push_back(worker.worker_id());
    }
    absl::StrAppend(
        &out, "left out: ", absl::StrJoin(hung, ", "),
        " (hung or straggled in a run; each again once its daemon restarts)\n");
  }
  absl::StrAppend(&out, "started:  ", FormatTime(job.status().start_time()),
                  "\n");
  if (job.status().end_time() > 0) {
    absl::StrAppend(&out, "ended:    ", FormatTime(job.status().end_time()),
                    "\n");
  }
  if (job.status().has_last_step()) {
    absl::StrAppend(&out, "last:     ",
                    FormatStep(job.status().last_step(),
                               job.manifest().spec().training().max_steps()),
                    "\n");
  }
  return out;
}

namespace {

// "predicted: step 0.063 s, bubble 0.029", then where a measurement is
// given "; measured (<what>): step 0.071 s, bubble 0.052 (+12.7%)", and a
// newline.
std::string PredictedAgainst(const chimera::v1::Prediction& predicted,
                             const std::string& what,
                             const chimera::v1::StepSummary* measured) {
  std::string line = absl::StrFormat("predicted: step %.3f s, bubble %.3f",
                                     predicted.iteration_seconds(), predicted.bubble_ratio());
  if (measured != nullptr) {
    absl::StrAppendFormat(
        &line, "; measured (%s): step %.3f s, bubble %.3f (%+.1f%%)", what,
        measured->step_seconds(), measured->bubble_ratio(),
        100 * (measured->step_seconds() / predicted.iteration_seconds() - 1));
  }
  return line + "\n";
}

}  // namespace

std::string FormatPredictedAgainstMeasured(const chimera::v1::Job& job) {
  const chimera::v1::Prediction& predicted = job.plan().prediction();
  if (predicted.iteration_seconds() <= 0) return "";
  if (!job.status().has_last_step())
    return PredictedAgainst(predicted, "", nullptr);
  const chimera::v1::StepSummary& last = job.status().last_step();
  return PredictedAgainst(predicted, absl::StrCat("step ", last.step() + 1),
                          &last);
}

std::string FormatPredictedAgainstSteps(
    const chimera::v1::Job& job,
    const std::vector<chimera::v1::StepSummary>& steps) {
  if (steps.empty()) return FormatPredictedAgainstMeasured(job);
  const chimera::v1::Prediction& predicted = job.plan().prediction();
  if (predicted.iteration_seconds() <= 0) return "";
  const size_t first = steps.size() / 10;
  std::vector<chimera::v1::StepSummary> settled(steps.begin() + first,
                                                steps.end());
  const auto middle = settled.begin() + settled.size() / 2;
  std::nth_element(settled.begin(), middle, settled.end(),
                   [](const auto& a, const auto& b) {
                     return a.step_seconds() < b.step_seconds();
                   });
  return PredictedAgainst(
      predicted,
      absl::StrCat("median of steps ", steps[first].step() + 1, "-",
                   steps.back().step() + 1),
      &*middle);
}

std::string FormatMemoryAgainstMeasured(const chimera::v1::Job& job) {
  const int64_t predicted = job.plan().prediction().peak_memory_bytes_max();
  if (predicted <= 0) return "";
  std::string line =
      absl::StrCat("memory: predicted peak ", FormatBytes(predicted),
                   " (the largest rank's)");
  int64_t measured = 0;
  for (const auto& worker : job.workers()) {
    measured = std::max(measured, worker.peak_memory_bytes());
  }
  if (measured > 0) {
    absl::StrAppendFormat(
        &line, "; measured %s (%+.1f%%)", FormatBytes(measured),
        100 * (static_cast<double>(measured) / predicted - 1));
  }
  return line + "\n";
}

std::string FormatPredictedBubble(const chimera::v1::Job& job, int rank) {
  const auto& predicted = job.plan().prediction().rank_bubble_ratios();
  return rank >= 0 && rank < predicted.size() ? absl::StrFormat("%.3f", predicted[rank]) : "-";
}

std::string FormatRecovery(const chimera::v1::JobRecovery& recovery) {
  std::string outcome;
  if (recovery.seconds_not_training() > 0) {
    outcome = absl::StrFormat(", not training for %.1f s",
                              recovery.seconds_not_training());
  } else if (recovery.to_plan().empty()) {
    outcome = ", not started again yet";
  } else {
    outcome = ", no step yet";
  }
  return absl::StrCat(
      FormatTime(recovery.time()), " recovery (", recovery.cause(),
      "): ", recovery.from_plan().empty() ? "-" : recovery.from_plan(), " -> ",
      recovery.to_plan().empty() ? "-" : recovery.to_plan(), " from step ",
      recovery.checkpoint_step(), outcome, ": ", recovery.reason());
}

std::string AsynchronousNote(const chimera::v1::Plan& plan) {
  if (plan.scheme() == "pipedream") {
    return "asynchronous: every micro-batch updates its stage and runs on "
           "weights a few updates old, so the weights are not those of "
           "mini-batch SGD";
  }
  if (plan.scheme() == "pipedream-2bw") {
    return "asynchronous: each step runs on the weights one update old, so "
           "the weights are not those of mini-batch SGD";
  }
  return "";
}

std::string FormatJobDescription(const chimera::v1::Job& job) {
  std::string out = FormatJobStatus(job);
  if (!job.status().recoveries().empty()) {
    absl::StrAppend(&out, "\nrecoveries (latest last):\n");
    for (const auto& recovery : job.status().recoveries()) {
      absl::StrAppend(&out, "  ", FormatRecovery(recovery), "\n");
    }
  }
  const auto& plan = job.plan();
  if (!plan.scheme().empty()) {
    absl::StrAppendFormat(
        &out,
        "\nplan: %s, W=%d D=%d, micro-batch %d x %d, pipelines %d%s%s%s\n",
        plan.scheme(), plan.width(), plan.depth(), plan.micro_batch_size(),
        plan.micro_batches(), plan.pipelines(),
        plan.concat().empty() ? "" : ", concat " + plan.concat(),
        plan.replication().empty() ? "" : ", replication " + plan.replication(),
        plan.recompute() ? ", recomputation" : "");
    if (const std::string note = AsynchronousNote(plan); !note.empty()) {
      absl::StrAppend(&out, note, "\n");
    }
    absl::StrAppend(&out, FormatPredictedAgainstMeasured(job),
                    FormatMemoryAgainstMeasured(job));
    absl::StrAppend(&out, "stages:\n");
    for (const auto& stage : plan.partition()) {
      absl::StrAppendFormat(&out, "  stage %-3d layers %d-%d\n", stage.stage(),
                            stage.first_layer(),
                            stage.first_layer() + stage.num_layers() - 1);
    }
    if (!plan.placement().empty()) absl::StrAppend(&out, "device map:\n");
    for (const auto& placed : plan.placement()) {
      std::string worker = "-";
      for (const auto& summary : job.workers()) {
        if (summary.rank() == placed.rank()) worker = summary.worker_id();
      }
      absl::StrAppendFormat(&out, "  rank %-3d node %-3d device %-3d worker %s\n",
                            placed.rank(), placed.node(), placed.device(),
                            worker);
    }
  }
  if (!job.workers().empty()) {
    absl::StrAppendFormat(
        &out, "\n%-5s %-20s %-8s %-10s %-11s %-10s %-10s %-10s %-12s %s\n", "RANK",
        "WORKER", "BUBBLE", "PREDICTED", "PEAK MEMORY", "WEIGHTS", "GRADIENTS", "OPTIMIZER",
        "ACTIVATIONS", "BUSY (s)");
    for (const auto& worker : job.workers()) {
      absl::StrAppendFormat(
          &out, "%-5d %-20s %-8.3f %-10s %-11s %-10s %-10s %-10s %-12s %.3f\n",
          worker.rank(), worker.worker_id(), worker.bubble_ratio(),
          FormatPredictedBubble(job, worker.rank()),
          FormatBytes(worker.peak_memory_bytes()),
          FormatBytes(worker.weights_bytes()),
          FormatBytes(worker.gradients_bytes()),
          FormatBytes(worker.optimizer_bytes()),
          FormatBytes(worker.activations_bytes()), worker.busy_seconds());
    }
  }
  return out;
}

std::string FormatWorkerTable(
    const std::vector<chimera::v1::WorkerInfo>& workers, bool wide) {
  std::vector<TextTable::Column> columns = {
      {"WORKER"}, {"NODE"}, {"STATE"}, {"MEMORY"}, {"JOB"}, {"RANK"}, {"METRICS"}};
  if (wide) {
    columns.insert(
        columns.end(),
        {{"HOST"}, {"DEVICES"}, {"INCARNATION"}, {"LAST HEARTBEAT"}, {"OP"}});
  }
  TextTable table(std::move(columns));
  for (const auto& worker : workers) {
    std::string state = chimera::v1::WorkerState_Name(worker.state());
    state = state.substr(std::string("WORKER_STATE_").size());
    const bool busy = worker.state() == chimera::v1::WORKER_STATE_BUSY;
    std::vector<std::string> row = {
        worker.worker_id(), worker.node(), state, FormatBytes(worker.memory_bytes()),
        busy ? worker.job_id() : "-", busy ? absl::StrCat(worker.rank()) : "-",
        worker.metrics_address().empty() ? "-" : worker.metrics_address()};
    if (wide) {
      std::vector<std::string> devices;
      for (const auto& device : worker.devices()) {
        devices.push_back(absl::StrCat(device.kind(), ":", device.index()));
      }
      row.insert(row.end(), {worker.host().empty() ? "-" : worker.host(),
                             absl::StrJoin(devices, ","),
                             absl::StrCat(worker.incarnation()),
                             FormatTime(worker.last_heartbeat_time()),
                             FormatTaskPosition(worker)});
    }
    table.AddRow(std::move(row));
  }
  return table.ToString();
}

}  // namespace chimera::client
