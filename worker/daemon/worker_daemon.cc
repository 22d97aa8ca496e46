#include "worker/daemon/worker_daemon.h"

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <optional>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/utf8.h"
#include "net/child_process.h"
#include "net/grpc_status.h"
#include "schedule/program_proto.h"
#include "worker/comm/shared_memory.h"
#include "worker/daemon/local_devices.h"
#include "worker/daemon/step_reports.h"
#include "worker/daemon/task_exit.h"
#include "worker/daemon/task_process.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/op_position.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(10);
// Between attempts to reach a coordinator that is down.
constexpr absl::Duration kReconnectDelay = absl::Seconds(1);
// A stopped task process gets this long to finish its step before SIGKILL.
constexpr absl::Duration kStopGrace = absl::Seconds(10);
constexpr absl::Duration kEventPoll = absl::Milliseconds(200);
// The coordinator keeps this much of a task's failure message, and refuses
// a registration whose held task carries more; a report far beyond it would
// be refused whole, and the task's end with it.
constexpr size_t kMaxTaskMessageBytes = 4096;

bool MeansRegisterAgain(const absl::Status& status) {
  return absl::IsNotFound(status) || absl::IsAborted(status);
}

}  // namespace

// One task process and the thread that relays its events.
class WorkerDaemon::Task {
 public:
  Task(WorkerDaemon* daemon, const chimera::v1::StartTask& start)
      : daemon_(daemon), start_(start) {
    const std::string file =
        absl::StrCat(daemon->options_.work_dir, "/task-", start.job_id(), "-",
                     start.attempt(), ".pb");
    const std::string log =
        absl::StrCat(daemon->options_.work_dir, "/task-", start.job_id(), "-",
                     start.attempt(), ".log");
    std::ofstream out(file, std::ios::binary);
    start.SerializeToOstream(&out);
    out.close();
    daemon->metrics_->TaskStarted(daemon->MetricsTaskInfo(start));
    std::vector<std::string> argv{daemon->options_.task_binary,
                                  "run-task",
                                  file,
                                  "--host",
                                  daemon->options_.host,
                                  "--gpu",
                                  std::to_string(daemon->options_.gpu),
                                  "--data-root",
                                  daemon->options_.roots.data,
                                  "--checkpoint-root",
                                  daemon->options_.roots.checkpoints};
    if (OpenPositionBoard()) {
      argv.insert(argv.end(), {"--position-segment", position_memory_->name()});
    }
    process_ = std::make_unique<net::ChildProcess>(
        argv, /*working_dir=*/"", /*log_file=*/"",
        ComputeThreadsEnvironment(ThreadsPerWorker(
            start.manifest().spec().resources(),
            WorkersSharingHost(start.plan(), start.program().rank(),
                               start.plan().placement_size()))));
    log_path_ = log;
    relay_ = std::thread([this] { Relay(); });
  }

  ~Task() {
    Stop();
    relay_.join();
  }

  void Stop() { stop_requested_ = true; }
  const std::string& job_id() const { return start_.job_id(); }
  int attempt() const { return start_.attempt(); }

  // Where the task is in its program, while it runs its steps; none
  // before its first op.
  std::optional<chimera::v1::TaskPosition> Position() const {
    if (!position_board_) return std::nullopt;
    {
      absl::MutexLock lock(&mutex_);
      if (end_state_ != chimera::v1::TASK_STATE_RUNNING) return std::nullopt;
    }
    const std::optional<OpPosition> at = position_board_->Read();
    const chimera::v1::WorkerProgram& program = start_.program();
    if (!at || at->instruction > program.instructions_size()) {
      return std::nullopt;
    }
    chimera::v1::TaskPosition position;
    position.set_job_id(start_.job_id());
    position.set_attempt(start_.attempt());
    position.set_rank(program.rank());
    position.set_step(static_cast<int32_t>(at->step));
    position.set_instruction(at->instruction);
    position.set_op_seconds(absl::ToDoubleSeconds(at->in_op));
    position.set_process_stopped(process_->Stopped());
    if (at->instruction == program.instructions_size()) {
      // Past its last instruction, a rank waits for its sends to be taken
      // before the next step.
      position.set_op("END_OF_STEP");
      position.set_waits_for_peer(true);
      return position;
    }
    const absl::StatusOr<schedule::Instruction> inst =
        schedule::InstructionFromProto(program.instructions(at->instruction),
                                       program.rank(), at->instruction);
    position.set_op(inst.ok() ? schedule::DescribeInstruction(*inst) : "");
    position.set_waits_for_peer(inst.ok() && schedule::WaitsForPeer(inst->op));
    return position;
  }

  // The task as a registration describes it: running, or how it ended.
  chimera::v1::HeldTask Held() const {
    chimera::v1::HeldTask held;
    held.set_job_id(start_.job_id());
    held.set_attempt(start_.attempt());
    held.set_rank(start_.program().rank());
    absl::MutexLock lock(&mutex_);
    held.set_state(end_state_);
    held.set_message(end_message_);
    held.set_retryable(end_retryable_);
    return held;
  }

 private:
  void Report(chimera::v1::TaskState state, const std::string& address,
              const std::string& full_message, int64_t first_step = 0,
              bool retryable = false) {
    // Cut where a string field stays valid UTF-8.
    const std::string message(Utf8Prefix(full_message, kMaxTaskMessageBytes));
    if (state != chimera::v1::TASK_STATE_READY) {
      // Kept for a registration, should the coordinator be away now.
      absl::MutexLock lock(&mutex_);
      end_state_ = state;
      end_message_ = message;
      end_retryable_ = retryable;
    }
    chimera::v1::ReportTaskStateRequest report;
    report.set_worker_id(daemon_->options_.worker_id);
    report.set_incarnation(daemon_->incarnation_);
    report.set_job_id(start_.job_id());
    report.set_attempt(start_.attempt());
    report.set_rank(start_.program().rank());
    report.set_state(state);
    report.set_store_address(address);
    report.set_message(message);
    report.set_first_step(static_cast<int32_t>(first_step));
    report.set_retryable(retryable);
    chimera::v1::ReportTaskStateResponse ignored;
    const absl::Status status = net::FromGrpcStatus(daemon_->stub_->ReportTaskState(
        daemon_->Context().get(), report, &ignored));
    if (!status.ok())
      CHIMERA_LOG(WARNING) << "reporting task state: " << status;
  }

  void Relay() {
    std::optional<absl::Status> failure;
    absl::Time stop_sent = absl::InfiniteFuture();
    while (true) {
      if (stop_requested_ && stop_sent == absl::InfiniteFuture()) {
        process_->Signal(SIGTERM);
        stop_sent = absl::Now();
      }
      if (absl::Now() - stop_sent > kStopGrace) process_->Signal(SIGKILL);
      // A traced step carries its timeline: alone, to stay within the
      // request's bound.
      if (record_timeline_ || step_reports_.Due(absl::Now())) ReportSteps();
      absl::StatusOr<std::string> line = process_->ReadLine(
          std::min(kEventPoll, step_reports_.TimeUntilDue(absl::Now())));
      if (absl::IsDeadlineExceeded(line.status())) continue;
      if (!line.ok()) break;  // stdout closed: the process is ending.
      absl::StatusOr<TaskEvent> event = ParseTaskEvent(*line);
      if (!event.ok()) {
        CHIMERA_LOG(WARNING) << event.status();
      } else if (event->kind == kReadyEvent) {
        Report(chimera::v1::TASK_STATE_READY, event->store_address, "",
               event->first_step);
      } else if (event->kind == kStepEvent) {
        // The task has mapped its position by its first step: the name
        // can go, so that no segment outlives a daemon that is killed.
        if (position_memory_) position_memory_->Unlink();
        daemon_->metrics_->StepDone(event->metrics);
        step_reports_.Add(event->metrics);
      } else {
        failure = event->failure;
      }
    }
    ReportSteps();
    const int code = process_->Wait(kStopGrace);
    if (!process_->err().empty()) {
      std::ofstream(log_path_, std::ios::app) << process_->err();
    }
    if (stop_requested_) {
      daemon_->metrics_->TaskEnded("stopped");
      Report(chimera::v1::TASK_STATE_STOPPED, "", "");
    } else if (code == 0) {
      daemon_->metrics_->TaskEnded("succeeded");
      Report(chimera::v1::TASK_STATE_SUCCEEDED, "", "");
    } else {
      daemon_->metrics_->TaskEnded("failed");
      const std::optional<int64_t> oom_kills = CgroupOomKills();
      const TaskExit exit = DescribeTaskExit(
          code, failure,
          oom_kills && oom_kills_before_ && *oom_kills > *oom_kills_before_);
      Report(chimera::v1::TASK_STATE_FAILED, "", exit.message,
             /*first_step=*/0, exit.retryable);
    }
    CHIMERA_LOG(INFO) << "task " << start_.job_id() << " rank "
                      << start_.program().rank() << " ended with status "
                      << code;
  }

  // The memory where the task process publishes its position. Without it
  // the task runs as well, and a hang is only named less precisely.
  bool OpenPositionBoard() {
    absl::StatusOr<SharedMemorySegment> memory = SharedMemorySegment::Create(
        RandomSegmentName(), OpPositionBoard::kBytes);
    if (!memory.ok()) {
      CHIMERA_LOG(WARNING) << "the task's position will not be known: "
                           << memory.status();
      return false;
    }
    position_memory_ = *std::move(memory);
    position_board_.emplace(position_memory_->data());
    return true;
  }

  // Sends the steps held back, if any.
  void ReportSteps() {
    std::vector<chimera::v1::WorkerStepMetrics> steps =
        step_reports_.Take(absl::Now());
    if (steps.empty()) return;
    chimera::v1::ReportMetricsRequest report;
    report.set_worker_id(daemon_->options_.worker_id);
    report.set_incarnation(daemon_->incarnation_);
    report.set_job_id(start_.job_id());
    report.set_attempt(start_.attempt());
    report.set_rank(start_.program().rank());
    for (size_t i = 0; i < steps.size(); ++i) {
      chimera::v1::WorkerStepMetrics* metrics =
          i == 0 ? report.mutable_metrics() : report.add_later_metrics();
      *metrics = std::move(steps[i]);
      // The timeline travels only while someone traces the job.
      if (!record_timeline_) metrics->clear_timeline();
    }
    chimera::v1::ReportMetricsResponse response;
    const absl::Status status = net::FromGrpcStatus(daemon_->stub_->ReportMetrics(
        daemon_->Context().get(), report, &response));
    // Once per outage, not once per step while the coordinator is away.
    if (!status.ok() && metrics_reached_coordinator_) {
      CHIMERA_LOG(WARNING) << "reporting metrics: " << status
                           << "; training goes on, and so do the attempts";
    } else if (status.ok() && !metrics_reached_coordinator_) {
      CHIMERA_LOG(INFO) << "reporting metrics again";
    }
    metrics_reached_coordinator_ = status.ok();
    record_timeline_ = status.ok() && response.record_timeline();
  }

  WorkerDaemon* const daemon_;
  const chimera::v1::StartTask start_;
  std::optional<SharedMemorySegment> position_memory_;
  std::optional<OpPositionBoard> position_board_;
  std::unique_ptr<net::ChildProcess> process_;
  std::string log_path_;
  std::atomic<bool> stop_requested_{false};
  mutable absl::Mutex mutex_;
  chimera::v1::TaskState end_state_ ABSL_GUARDED_BY(mutex_) =
      chimera::v1::TASK_STATE_RUNNING;
  std::string end_message_ ABSL_GUARDED_BY(mutex_);
  bool end_retryable_ ABSL_GUARDED_BY(mutex_) = false;
  // The cgroup's OOM kills when the task started, to tell whether the
  // kernel killed it for memory.
  const std::optional<int64_t> oom_kills_before_ = CgroupOomKills();
  // The steps not reported yet, what the coordinator said in its last
  // answer to ReportMetrics, and whether the last report reached it; only
  // the relay thread uses them.
  StepReports step_reports_{
      kStepReportInterval, kMaxStepsPerReport,
      start_.manifest().spec().training().checkpoint_every()};
  bool record_timeline_ = false;
  bool metrics_reached_coordinator_ = true;
  std::thread relay_;
};

WorkerDaemon::WorkerDaemon(
    DaemonOptions options,
    std::shared_ptr<grpc::ChannelCredentials> credentials)
    : options_(std::move(options)),
      resources_(DiscoverLocalResources()),
      incarnation_(absl::Uniform<uint64_t>(absl::BitGen(), 1, UINT64_MAX)),
      metrics_(std::make_shared<DaemonMetrics>(
          options_.worker_id,
          options_.node.empty() ? resources_.node : options_.node,
          options_.blas_core)) {
  // gRPC backs off up to two minutes between attempts to reach a server
  // that went away, and resolves its name again at most every 30 s (which
  // held workers back from a coordinator restarted within seconds for up to
  // 4 s); a restarted coordinator waits for its workers (--readopt-timeout),
  // so they try again every second.
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                   static_cast<int>(absl::ToInt64Milliseconds(kReconnectDelay)));
  arguments.SetInt(
      GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS,
      static_cast<int>(absl::ToInt64Milliseconds(kReconnectDelay)));
  stub_ = chimera::v1::WorkerService::NewStub(
      grpc::CreateCustomChannel(options_.coordinator, credentials, arguments));
}

WorkerDaemon::~WorkerDaemon() {
  Shutdown();
  if (heartbeats_.joinable()) heartbeats_.join();
  DropTask();
}

std::unique_ptr<grpc::ClientContext> WorkerDaemon::Context() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
  if (!options_.token.empty())
    context->AddMetadata("authorization", "Bearer " + options_.token);
  return context;
}

DaemonMetrics::TaskInfo WorkerDaemon::MetricsTaskInfo(
    const chimera::v1::StartTask& start) const {
  DaemonMetrics::TaskInfo info;
  info.job_id = start.job_id();
  info.rank = start.program().rank();
  info.memory_limit_bytes = resources_.memory_bytes;
  if (start.manifest().spec().resources().device() != "gpu") return info;
  info.gpu = options_.gpu;
  for (const LocalDevice& device : resources_.devices) {
    if (device.kind == "gpu" && device.index == options_.gpu)
      info.memory_limit_bytes = device.memory_bytes;
  }
  return info;
}

absl::StatusOr<bool> WorkerDaemon::Register() {
  chimera::v1::RegisterWorkerRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_incarnation(incarnation_);
  request.set_node(options_.node.empty() ? resources_.node : options_.node);
  request.set_memory_bytes(resources_.memory_bytes);
  request.set_cpu_cores(resources_.cpu_cores);
  request.set_metrics_address(options_.metrics_address);
  request.set_host(options_.host);
  for (const LocalDevice& local : resources_.devices) {
    if (local.kind == "gpu" && local.index != options_.gpu) continue;
    chimera::v1::Device* device = request.add_devices();
    device->set_kind(local.kind);
    device->set_index(local.index);
    device->set_memory_bytes(local.memory_bytes);
    device->set_peak_flops(options_.peak_flops > 0
                               ? options_.peak_flops
                               : KnownPeakFlops(local.name).value_or(0));
  }
  {
    absl::MutexLock lock(&mutex_);
    if (task_) *request.mutable_task() = task_->Held();
  }
  chimera::v1::RegisterWorkerResponse response;
  const absl::Status status =
      net::FromGrpcStatus(stub_->RegisterWorker(Context().get(), request, &response));
  if (!status.ok()) return status;
  heartbeat_period_ms_ = std::max<int64_t>(1, response.heartbeat_period_ms());
  SetRegistered(true);
  CHIMERA_LOG(INFO) << "registered with " << options_.coordinator << " as "
                    << options_.worker_id
                    << (response.keep_task() ? "; it keeps our running task"
                                             : "");
  return response.keep_task();
}

void WorkerDaemon::SetRegistered(bool registered) {
  registered_ = registered;
  metrics_->SetRegistered(registered);
}

void WorkerDaemon::HeartbeatLoop() {
  while (!shutdown_.WaitForNotificationWithTimeout(
      absl::Milliseconds(heartbeat_period_ms_.load()))) {
    if (!registered_) continue;
    chimera::v1::HeartbeatRequest beat;
    beat.set_worker_id(options_.worker_id);
    beat.set_incarnation(incarnation_);
    {
      absl::MutexLock lock(&mutex_);
      if (task_) {
        if (std::optional<chimera::v1::TaskPosition> position =
                task_->Position()) {
          *beat.mutable_task_position() = *std::move(position);
        }
      }
    }
    chimera::v1::HeartbeatResponse ignored;
    const absl::Status status =
        net::FromGrpcStatus(stub_->Heartbeat(Context().get(), beat, &ignored));
    if (!status.ok()) metrics_->HeartbeatFailed();
    if (MeansRegisterAgain(status)) {
      // The coordinator restarted or gave up on us: registering again tells
      // it which task we hold.
      CHIMERA_LOG(WARNING) << "heartbeat: " << status << "; registering again";
      SetRegistered(false);
      absl::MutexLock lock(&mutex_);
      if (stream_) stream_->TryCancel();
    }
  }
}

absl::Status WorkerDaemon::Watch() {
  chimera::v1::WatchAssignmentsRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_incarnation(incarnation_);
  auto context = std::make_shared<grpc::ClientContext>();
  if (!options_.token.empty())
    context->AddMetadata("authorization", "Bearer " + options_.token);
  {
    absl::MutexLock lock(&mutex_);
    stream_ = context;
  }
  auto reader = stub_->WatchAssignments(context.get(), request);
  chimera::v1::Assignment assignment;
  while (reader->Read(&assignment)) Handle(assignment);
  const absl::Status status = net::FromGrpcStatus(reader->Finish());
  absl::MutexLock lock(&mutex_);
  stream_.reset();
  return status;
}

void WorkerDaemon::Handle(const chimera::v1::Assignment& assignment) {
  if (assignment.has_start()) {
    DropTask();
    CHIMERA_LOG(INFO) << "starting job " << assignment.start().job_id()
                      << " rank " << assignment.start().program().rank();
    absl::MutexLock lock(&mutex_);
    task_ = std::make_unique<Task>(this, assignment.start());
    return;
  }
  absl::MutexLock lock(&mutex_);
  if (task_ && task_->job_id() == assignment.stop().job_id() &&
      task_->attempt() == assignment.stop().attempt()) {
    CHIMERA_LOG(INFO) << "stopping job " << assignment.stop().job_id();
    task_->Stop();
  }
}

void WorkerDaemon::DropTask() {
  std::unique_ptr<Task> task;
  {
    absl::MutexLock lock(&mutex_);
    task = std::move(task_);
  }
  task.reset();  // Stops the process and waits for its relay to finish.
}

absl::Status WorkerDaemon::Run() {
  heartbeats_ = std::thread([this] { HeartbeatLoop(); });
  while (!shutdown_.HasBeenNotified()) {
    if (!registered_) {
      const absl::StatusOr<bool> kept = Register();
      // Another daemon holds this worker id: retrying would not change that.
      if (absl::IsAlreadyExists(kept.status())) {
        shutdown_.Notify();
        return kept.status();
      }
      if (!kept.ok()) {
        CHIMERA_LOG(WARNING) << "cannot register with " << options_.coordinator
                             << ": " << kept.status();
        shutdown_.WaitForNotificationWithTimeout(kReconnectDelay);
        continue;
      }
      if (!*kept) DropTask();
    }
    const absl::Status status = Watch();
    if (shutdown_.HasBeenNotified()) break;
    if (MeansRegisterAgain(status)) SetRegistered(false);
    CHIMERA_LOG(WARNING) << "assignment stream ended: " << status;
    shutdown_.WaitForNotificationWithTimeout(kReconnectDelay);
  }
  DropTask();
  return absl::OkStatus();
}

void WorkerDaemon::Shutdown() {
  if (!shutdown_.HasBeenNotified()) shutdown_.Notify();
  absl::MutexLock lock(&mutex_);
  if (stream_) stream_->TryCancel();
}

}  // namespace chimera::worker
