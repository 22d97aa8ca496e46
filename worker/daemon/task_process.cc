#include "worker/daemon/task_process.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "net/server_address.h"
#include "schedule/program_proto.h"
#include "worker/runtime/task_runner.h"

namespace chimera::worker {
namespace {

// What the daemon relays to the coordinator of one step.
chimera::v1::WorkerStepMetrics StepReport(const StepMetrics& metrics) {
  chimera::v1::WorkerStepMetrics report;
  report.set_step(static_cast<int32_t>(metrics.step));
  report.set_loss(metrics.loss);
  report.set_step_seconds(metrics.step_seconds);
  report.set_busy_seconds(metrics.busy_seconds);
  report.set_bubble_seconds(metrics.bubble_seconds);
  report.set_recv_wait_seconds(metrics.recv_wait_seconds);
  report.set_exposed_allreduce_seconds(metrics.allreduce_wait_seconds);
  report.set_samples(metrics.samples);
  report.set_tokens(metrics.tokens);
  report.set_weights_bytes(metrics.weights_bytes);
  report.set_gradients_bytes(metrics.gradients_bytes);
  report.set_optimizer_bytes(metrics.optimizer_bytes);
  report.set_activations_bytes(metrics.activations_bytes);
  report.set_peak_memory_bytes(metrics.memory_peak_bytes);
  report.set_checkpoint_step(static_cast<int32_t>(metrics.checkpoint_step));
  const SecondsByOp& by_op = metrics.seconds_by_op;
  chimera::v1::SecondsByOp* seconds = report.mutable_seconds_by_op();
  seconds->set_forward(by_op.forward);
  seconds->set_backward(by_op.backward);
  seconds->set_send(by_op.send);
  seconds->set_recv(by_op.recv);
  seconds->set_allreduce(by_op.allreduce);
  seconds->set_optimizer(by_op.optimizer);
  // Always on the event line (a local pipe); the daemon forwards it only
  // while the coordinator asks for it.
  chimera::v1::StepTimeline* timeline = report.mutable_timeline();
  timeline->set_start_time(metrics.start_unix_seconds);
  for (size_t i = 0; i < metrics.op_start_seconds.size(); ++i) {
    timeline->add_op_start_seconds(metrics.op_start_seconds[i]);
    timeline->add_op_end_seconds(metrics.op_start_seconds[i] +
                                 metrics.op_seconds[i]);
  }
  return report;
}

// Reports each step on the event stream.
class EventWriter : public TaskObserver {
 public:
  explicit EventWriter(std::ostream& events) : events_(events) {}

  void OnStoreReady(const std::string& address, int64_t first_step) override {
    events_ << kReadyEvent << " " << address << " " << first_step << std::endl;
  }

  absl::Status OnStep(const StepMetrics& metrics, Communicator&) override {
    std::string json;
    google::protobuf::util::MessageToJsonString(StepReport(metrics), &json);
    events_ << kStepEvent << " " << json << std::endl;
    return absl::OkStatus();
  }

 private:
  std::ostream& events_;
};

absl::StatusOr<chimera::v1::StartTask> ReadTask(const std::string& task_file) {
  std::ifstream in(task_file, std::ios::binary);
  chimera::v1::StartTask task;
  if (!in || !task.ParseFromIstream(&in)) {
    // Its name only: the message reaches the job's submitter, who has no
    // need of the worker's directories.
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read the task file '",
        std::filesystem::path(task_file).filename().string(),
        "' in the daemon's --work-dir"));
  }
  return task;
}

// This rank's share of the schedule the coordinator validated, run as sent.
absl::StatusOr<schedule::RankSchedule> RankScheduleOf(
    const chimera::v1::StartTask& task) {
  if (task.outline().ranks_size() == 0) {
    return absl::FailedPreconditionError(
        "the task carries no schedule outline: the coordinator is older than "
        "this worker; run the same version on both");
  }
  if (task.rank() != task.program().rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the task is for rank ", task.rank(),
                     " and its program for rank ", task.program().rank()));
  }
  return schedule::RankScheduleFromProto(task.outline(), task.program());
}

absl::Status Run(const TaskProcessArgs& args, std::ostream& events) {
  ASSIGN_OR_RETURN(const chimera::v1::StartTask task, ReadTask(args.task_file));
  TaskRunOptions options;
  ASSIGN_OR_RETURN(options.schedule, RankScheduleOf(task));
  TaskSite site{.roots = args.roots, .gpu_index = args.gpu};
  if (task.rendezvous().timeout_ms() > 0) {
    site.timeout = absl::Milliseconds(task.rendezvous().timeout_ms());
  }
  // Checkpoints are per job id: every attempt of this job, and no other job.
  ASSIGN_OR_RETURN(options.spec, TaskSpecFor(task.manifest(), task.plan(),
                                             task.rank(), task.job_id(), site));
  options.host = args.host;
  options.position_segment = args.position_segment;
  if (task.rank() != 0) {
    const absl::StatusOr<net::ServerAddress> store =
        net::ParseDialAddress(task.rendezvous().store_address());
    if (!store.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous: ", store.status().message()));
    }
    options.store_host = store->host;
    options.store_port = store->port;
  }
  options.recorded_checkpoint_step = task.start_step();
  options.attempt = task.attempt();
  options.last_step = options.spec.max_steps;
  EventWriter writer(events);
  return RunTask(options, writer);
}

}  // namespace

int RunTaskProcess(const TaskProcessArgs& args, std::ostream& events) {
  const absl::Status status = Run(args, events);
  if (status.ok()) return 0;
  std::string message(status.message());
  std::replace(message.begin(), message.end(), '\n', ' ');
  events << kFailedEvent << " " << static_cast<int>(status.code()) << " "
         << message << std::endl;
  return 1;
}

absl::StatusOr<TaskEvent> ParseTaskEvent(absl::string_view line) {
  TaskEvent event;
  const size_t space = line.find(' ');
  event.kind = std::string(line.substr(0, space));
  const absl::string_view rest =
      space == absl::string_view::npos ? "" : line.substr(space + 1);
  if (event.kind == kReadyEvent) {
    const std::vector<std::string> words =
        absl::StrSplit(rest, ' ', absl::SkipEmpty());
    if (words.size() != 2 || !absl::SimpleAtoi(words[1], &event.first_step) ||
        event.first_step < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed ready event: ", line));
    }
    event.store_address = words[0];
  } else if (event.kind == kStepEvent) {
    google::protobuf::util::JsonParseOptions options;
    if (!google::protobuf::util::JsonStringToMessage(std::string(rest),
                                                     &event.metrics, options)
             .ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed step event: ", line));
    }
  } else if (event.kind == kFailedEvent) {
    const size_t space = rest.find(' ');
    int code = 0;
    if (!absl::SimpleAtoi(rest.substr(0, space), &code) || code <= 0 ||
        code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
      return absl::InvalidArgumentError(
          absl::StrCat("malformed failed event: ", line));
    }
    event.failure = absl::Status(
        static_cast<absl::StatusCode>(code),
        space == absl::string_view::npos ? "" : rest.substr(space + 1));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown task event: ", line));
  }
  return event;
}

}  // namespace chimera::worker
