// chimera-coordinator as a real process on loopback, driven over real gRPC
// by the test: clients submit and watch jobs, fake workers (gRPC clients
// that register, heartbeat, follow their assignment stream and report)
// play the daemons. Every RPC has a deadline.
#include <grpcpp/grpcpp.h>

#include <grpcpp/generic/generic_stub.h>

#include <atomic>
#include <deque>
#include <fstream>
#include <future>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "chimera/v1/service.grpc.pb.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/grpc_status.h"
#include "tests/support/coordinator_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_job.h"

namespace chimera {
namespace {

using ::chimera::testing::CoordinatorProcess;
using ::testing::HasSubstr;

constexpr absl::Duration kEventTimeout = absl::Seconds(20);
constexpr auto kRpcDeadline = std::chrono::seconds(10);
constexpr char kClientToken[] = "client-secret-of-the-test";
constexpr char kWorkerToken[] = "worker-secret-of-the-test";

std::unique_ptr<grpc::ClientContext> Context(const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  return context;
}

// A job for `workers` (up to 4) pipeline stages; with `valid` false, a hidden
// size its heads do not divide.
chimera::v1::TrainJob Manifest(int workers, bool valid = true) {
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  chimera::v1::JobSpec& spec = *job.mutable_spec();
  spec.mutable_model()->set_num_layers(4);
  spec.mutable_model()->set_hidden_size(valid ? 32 : 30);
  spec.mutable_model()->set_num_heads(4);
  spec.mutable_parallelism()->set_schedule("gpipe");
  spec.mutable_parallelism()->set_pipeline(workers);
  spec.mutable_resources()->set_workers(workers);
  return job;
}

// A number in process `pid`'s /proc status ("Threads:", "VmRSS:" in KiB),
// -1 if unknown.
int64_t ProcStatusOf(pid_t pid, const std::string& field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  while (status >> key) {
    if (key == field) {
      int64_t value = -1;
      status >> value;
      return value;
    }
  }
  return -1;
}

// A chimera-coordinator process on an ephemeral loopback port, and the
// test's client of its JobService.
class Coordinator {
 public:
  explicit Coordinator(const std::string& db,
                       const std::vector<std::string>& more_flags = {},
                       int max_workers = 8)
      : process_(CoordinatorProcess::Start(
            CHIMERA_COORDINATOR_BINARY, Flags(db, more_flags, max_workers))) {
    EXPECT_TRUE(process_.ok()) << process_.status();
    address_ = process_.ok() ? process_->address() : "";
    channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    jobs_ = chimera::v1::JobService::NewStub(channel_);
  }
  ~Coordinator() {
    if (process_.ok()) {
      EXPECT_EQ(process_->Stop(), 0) << process_->err();
    }
  }

  static std::vector<std::string> Flags(const std::string& db,
                                        const std::vector<std::string>& more,
                                        int max_workers) {
    std::vector<std::string> flags = {
        "--db", db, "--heartbeat-period", "0.2",
        "--heartbeat-failure-threshold", "3", "--max-workers",
        std::to_string(max_workers), "--client-token", kClientToken,
        "--worker-token", kWorkerToken};
    flags.insert(flags.end(), more.begin(), more.end());
    return flags;
  }

  const std::string& address() const { return address_; }
  pid_t pid() { return process_.ok() ? process_->process().pid() : -1; }
  // SIGTERM, then its exit status once it exited (killed after `timeout`).
  int Stop(absl::Duration timeout) { return process_->Stop(timeout); }

  // The worker's state as ListWorkers shows it; UNSPECIFIED when unlisted.
  chimera::v1::WorkerState WorkerState(const std::string& id) {
    chimera::v1::ListWorkersResponse response;
    const grpc::Status status = jobs_->ListWorkers(
        Context(kClientToken).get(), chimera::v1::ListWorkersRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    for (const auto& worker : response.workers()) {
      if (worker.worker_id() == id) return worker.state();
    }
    return chimera::v1::WORKER_STATE_UNSPECIFIED;
  }
  chimera::v1::JobService::Stub& jobs() { return *jobs_; }

  // Calls `method` with `bytes` as the request, whatever they hold.
  grpc::Status CallWithRawBytes(const std::string& method, const std::string& bytes,
                                const std::string& token = kClientToken) {
    grpc::GenericStub stub(channel_);
    grpc::Slice slice(bytes);
    const grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    std::unique_ptr<grpc::ClientContext> context = Context(token);
    stub.UnaryCall(context.get(), method, grpc::StubOptions(), &request, &response,
                   [&done](grpc::Status status) { done.set_value(std::move(status)); });
    return done.get_future().get();
  }

  absl::StatusOr<chimera::v1::Job> Submit(const chimera::v1::TrainJob& manifest,
                                          const std::string& token = kClientToken) {
    chimera::v1::SubmitJobRequest request;
    *request.mutable_job() = manifest;
    chimera::v1::Job job;
    grpc::Status status = jobs_->SubmitJob(Context(token).get(), request, &job);
    RETURN_IF_ERROR(net::FromGrpcStatus(status));
    return job;
  }

  chimera::v1::Job Get(const std::string& id) {
    chimera::v1::GetJobRequest request;
    request.set_job_id(id);
    chimera::v1::Job job;
    grpc::Status status = jobs_->GetJob(Context(kClientToken).get(), request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  int JobCount() {
    chimera::v1::ListJobsResponse response;
    grpc::Status status =
        jobs_->ListJobs(Context(kClientToken).get(), chimera::v1::ListJobsRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.jobs_size();
  }

  // Polls until the job's message holds `text` or the timeout passes.
  chimera::v1::Job AwaitMessage(const std::string& id, const std::string& text) {
    const absl::Time deadline = absl::Now() + kEventTimeout;
    chimera::v1::Job job = Get(id);
    while (!absl::StrContains(job.status().message(), text) &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
      job = Get(id);
    }
    return job;
  }

  // Polls until the job reaches `state` or the timeout passes.
  chimera::v1::Job AwaitState(const std::string& id, chimera::v1::JobState state) {
    const absl::Time deadline = absl::Now() + kEventTimeout;
    chimera::v1::Job job = Get(id);
    while (job.status().state() != state && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
      job = Get(id);
    }
    return job;
  }

 private:
  absl::StatusOr<CoordinatorProcess> process_;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<chimera::v1::JobService::Stub> jobs_;
};

// A worker daemon played by the test: registers, heartbeats (until told to
// go silent) and queues what its assignment stream delivers.
class FakeWorker {
 public:
  FakeWorker(const std::string& address, const std::string& id)
      : id_(id),
        incarnation_(absl::Uniform<uint64_t>(random_, 1, UINT64_MAX)),
        stub_(chimera::v1::WorkerService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    chimera::v1::RegisterWorkerRequest request;
    request.set_worker_id(id);
    request.set_incarnation(incarnation_);
    request.set_node("localhost");
    request.set_host("127.0.0.1");
    request.set_memory_bytes(int64_t{4} << 30);
    request.add_devices()->set_kind("cpu");
    chimera::v1::RegisterWorkerResponse response;
    grpc::Status status = stub_->RegisterWorker(Context(kWorkerToken).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    heartbeats_ = std::thread([this] {
      while (!stop_) {
        if (!silent_) {
          chimera::v1::HeartbeatRequest beat;
          beat.set_worker_id(id_);
          beat.set_incarnation(incarnation_);
          chimera::v1::HeartbeatResponse ignored;
          stub_->Heartbeat(Context(kWorkerToken).get(), beat, &ignored);
        }
        absl::SleepFor(absl::Milliseconds(100));
      }
    });
    stream_ = std::thread([this] {
      chimera::v1::WatchAssignmentsRequest watch;
      watch.set_worker_id(id_);
      watch.set_incarnation(incarnation_);
      stream_context_.AddMetadata("authorization", std::string("Bearer ") + kWorkerToken);
      auto reader = stub_->WatchAssignments(&stream_context_, watch);
      chimera::v1::Assignment assignment;
      while (reader->Read(&assignment)) {
        absl::MutexLock lock(&mutex_);
        received_.push_back(assignment);
      }
      reader->Finish();
    });
  }

  ~FakeWorker() {
    stop_ = true;
    stream_context_.TryCancel();
    heartbeats_.join();
    stream_.join();
  }

  void GoSilent() { silent_ = true; }

  std::optional<chimera::v1::Assignment> Next(absl::Duration timeout = kEventTimeout) {
    absl::MutexLock lock(&mutex_);
    auto arrived = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return !received_.empty(); };
    if (!mutex_.AwaitWithTimeout(absl::Condition(&arrived), timeout)) return std::nullopt;
    chimera::v1::Assignment next = received_.front();
    received_.pop_front();
    return next;
  }

  grpc::Status ReportState(const chimera::v1::StartTask& task, chimera::v1::TaskState state,
                           const std::string& address = "", const std::string& message = "") {
    chimera::v1::ReportTaskStateRequest report;
    report.set_worker_id(id_);
    report.set_incarnation(incarnation_);
    report.set_job_id(task.job_id());
    report.set_attempt(task.attempt());
    report.set_rank(task.program().rank());
    report.set_state(state);
    report.set_store_address(address);
    report.set_message(message);
    chimera::v1::ReportTaskStateResponse ignored;
    return stub_->ReportTaskState(Context(kWorkerToken).get(), report, &ignored);
  }

  grpc::Status ReportStep(const chimera::v1::StartTask& task, int step, double loss) {
    chimera::v1::ReportMetricsRequest report;
    report.set_worker_id(id_);
    report.set_incarnation(incarnation_);
    report.set_job_id(task.job_id());
    report.set_rank(task.program().rank());
    report.mutable_metrics()->set_step(step);
    report.mutable_metrics()->set_loss(loss);
    report.mutable_metrics()->set_step_seconds(1.0);
    chimera::v1::ReportMetricsResponse ignored;
    return stub_->ReportMetrics(Context(kWorkerToken).get(), report, &ignored);
  }

 private:
  absl::BitGen random_;
  const std::string id_;
  const uint64_t incarnation_;
  std::unique_ptr<chimera::v1::WorkerService::Stub> stub_;
  grpc::ClientContext stream_context_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> silent_{false};
  absl::Mutex mutex_;
  std::deque<chimera::v1::Assignment> received_ ABSL_GUARDED_BY(mutex_);
  std::thread heartbeats_;
  std::thread stream_;
};

class CoordinatorServiceTest : public ::testing::Test {
 protected:
  std::string db() const { return dir_.path() + "/jobs.db"; }
  chimera::testing::TempDir dir_;
};

TEST_F(CoordinatorServiceTest, BadRequestsGetTheirCodesAndChangeNothing) {
  Coordinator coordinator(db());
  ASSERT_TRUE(coordinator.Submit(Manifest(2)).ok());
  const int before = coordinator.JobCount();

  absl::StatusOr<chimera::v1::Job> malformed = coordinator.Submit(Manifest(2, false));
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(malformed.status().message(), HasSubstr("spec.model.hiddenSize"));

  chimera::v1::TrainJob huge = Manifest(2);
  huge.mutable_spec()->clear_parallelism();
  huge.mutable_spec()->mutable_resources()->set_workers(64);
  EXPECT_EQ(coordinator.Submit(huge).status().code(), absl::StatusCode::kFailedPrecondition);

  EXPECT_EQ(coordinator.Submit(Manifest(2), "wrong-token").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(coordinator.Submit(Manifest(2), "").status().code(),
            absl::StatusCode::kUnauthenticated);

  chimera::v1::GetJobRequest unknown;
  unknown.set_job_id("no-such-job");
  chimera::v1::Job ignored;
  EXPECT_EQ(coordinator.jobs().GetJob(Context(kClientToken).get(), unknown, &ignored).error_code(),
            grpc::StatusCode::NOT_FOUND);
  chimera::v1::StopJobRequest stop;
  stop.set_job_id("no-such-job");
  EXPECT_EQ(coordinator.jobs().StopJob(Context(kClientToken).get(), stop, &ignored).error_code(),
            grpc::StatusCode::NOT_FOUND);
  chimera::v1::WatchJobRequest follow;
  follow.set_job_id("no-such-job");
  for (const auto& [token, code] : {std::pair{kClientToken, grpc::StatusCode::NOT_FOUND},
                                    std::pair{"wrong-token", grpc::StatusCode::UNAUTHENTICATED}}) {
    auto context = Context(token);
    auto events = coordinator.jobs().WatchJob(context.get(), follow);
    chimera::v1::JobEvent event;
    EXPECT_FALSE(events->Read(&event));
    EXPECT_EQ(events->Finish().error_code(), code) << token;
  }
  // An enum value outside JobState used to list every job.
  chimera::v1::ListJobsRequest list;
  list.set_state(static_cast<chimera::v1::JobState>(99));
  chimera::v1::ListJobsResponse listed;
  const grpc::Status bad_state =
      coordinator.jobs().ListJobs(Context(kClientToken).get(), list, &listed);
  EXPECT_EQ(bad_state.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_state.error_message(), HasSubstr("state: 99"));
  EXPECT_EQ(listed.jobs_size(), 0);
  // Bytes that are no protobuf message: gRPC itself answered INTERNAL with
  // an empty message, as if the coordinator had failed.
  const grpc::Status garbage =
      coordinator.CallWithRawBytes("/chimera.v1.JobService/SubmitJob", "\xff\xff\xff\xff");
  EXPECT_EQ(garbage.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(garbage.error_message(),
              HasSubstr("not a valid message of /chimera.v1.JobService/SubmitJob"));
  EXPECT_EQ(coordinator.JobCount(), before);
}

// Planning a job of 10,000 layers with its parallelism left open takes the
// planner long on 16 workers. It runs beside the loop that declares workers
// dead, which never waits for it, and it gives up within its budget, saying
// so; SIGTERM ends the coordinator at once, search or not.
TEST_F(CoordinatorServiceTest, PlanningAHugeJobBlindsNothingAndGivesUpInItsBudget) {
  // 16 workers to plan for, and one more, which dies while they are.
  constexpr int kWorkers = 17;
  Coordinator coordinator(db(), {"--planning-timeout", "4"}, kWorkers);
  std::vector<std::unique_ptr<FakeWorker>> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(
        std::make_unique<FakeWorker>(coordinator.address(), absl::StrCat("w", i)));
  }
  chimera::v1::TrainJob huge = Manifest(kWorkers - 1);
  huge.mutable_spec()->mutable_model()->set_num_layers(10000);
  // 528 candidates, about 10 s of search on this machine.
  huge.mutable_spec()->mutable_training()->set_global_batch_size(256);
  huge.mutable_spec()->mutable_training()->clear_micro_batch_size();
  huge.mutable_spec()->clear_parallelism();
  absl::StatusOr<chimera::v1::Job> job = coordinator.Submit(huge);
  ASSERT_TRUE(job.ok()) << job.status();
  const chimera::v1::Job planning = coordinator.AwaitMessage(job->id(), "planning");
  ASSERT_THAT(planning.status().message(), HasSubstr("waiting: planning for 16 idle"));

  // 0.6 s of silence kills a worker: the loop notices while the search runs.
  workers[16]->GoSilent();
  const absl::Time silent = absl::Now();
  while (coordinator.WorkerState("w16") != chimera::v1::WORKER_STATE_DEAD &&
         absl::Now() - silent < kEventTimeout) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(coordinator.WorkerState("w16"), chimera::v1::WORKER_STATE_DEAD);
  EXPECT_LT(absl::Now() - silent, absl::Seconds(3))
      << "the dead worker was noticed late: something held up the loop";

  const chimera::v1::Job failed =
      coordinator.AwaitState(job->id(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(), HasSubstr("planning gave up after 4s"));

  // Another search is under way (the workers changed); SIGTERM ends it.
  ASSERT_TRUE(coordinator.Submit(huge).ok());
  const absl::Time asked = absl::Now();
  EXPECT_EQ(coordinator.Stop(absl::Seconds(30)), 0);
  EXPECT_LT(absl::Now() - asked, absl::Seconds(5));
}

// Thirty 15 MB requests without a token took a coordinator from 64 to 210 MB
// resident, never given back: gRPC read each whole before the handler
// checked the token. The token is now checked on the call's headers.
TEST_F(CoordinatorServiceTest, ARequestWithoutItsTokenIsRefusedBeforeItsBodyIsRead) {
  Coordinator coordinator(db());
  chimera::v1::SubmitJobRequest request;
  *request.mutable_job() = Manifest(2);
  request.mutable_job()->mutable_metadata()->set_name(std::string(7 << 20, 'x'));
  const std::string seven_megabytes = request.SerializeAsString();
  const int64_t resident_before = ProcStatusOf(coordinator.pid(), "VmRSS:");
  for (int i = 0; i < 30; ++i) {
    const grpc::Status refused = coordinator.CallWithRawBytes(
        "/chimera.v1.JobService/SubmitJob", seven_megabytes, i % 2 == 0 ? "" : kWorkerToken);
    ASSERT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
  }
  const int64_t grown_kib = ProcStatusOf(coordinator.pid(), "VmRSS:") - resident_before;
  // Reading them grew it by some 65 MiB; refusing them at the headers by
  // about one.
  EXPECT_LT(grown_kib, 16 << 10) << "the coordinator read what it refused";
  // Beyond any method's bound: refused for its token, not its size.
  request.mutable_job()->mutable_metadata()->set_name(std::string(20 << 20, 'x'));
  const grpc::Status huge = coordinator.CallWithRawBytes("/chimera.v1.JobService/SubmitJob",
                                                         request.SerializeAsString(), "");
  EXPECT_EQ(huge.error_code(), grpc::StatusCode::UNAUTHENTICATED) << huge.error_message();
  EXPECT_EQ(coordinator.JobCount(), 0);
  // Probes send no token.
  const grpc::Status health = coordinator.CallWithRawBytes("/grpc.health.v1.Health/Check", "", "");
  EXPECT_TRUE(health.ok()) << health.error_message();
}

// The server reads up to the largest request of any method (a traced step's
// metrics); the others are bounded far below it.
TEST_F(CoordinatorServiceTest, ARequestBeyondItsMethodsBoundIsRefusedNamingTheBound) {
  Coordinator coordinator(db());
  chimera::v1::TrainJob big = Manifest(2);
  big.mutable_metadata()->set_name(std::string(300 << 10, 'x'));
  const absl::StatusOr<chimera::v1::Job> job = coordinator.Submit(big);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(job.status().message(), HasSubstr("SubmitJob takes at most 262144"));

  auto workers = chimera::v1::WorkerService::NewStub(
      grpc::CreateChannel(coordinator.address(), grpc::InsecureChannelCredentials()));
  chimera::v1::HeartbeatRequest beat;
  beat.set_worker_id(std::string(100 << 10, 'w'));
  chimera::v1::HeartbeatResponse ignored;
  const grpc::Status heartbeat = workers->Heartbeat(Context(kWorkerToken).get(), beat, &ignored);
  EXPECT_EQ(heartbeat.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(heartbeat.error_message(), HasSubstr("Heartbeat takes at most 65536"));

  // A traced step's metrics go up to the server's limit: read, then
  // answered by the handler (no such worker here).
  chimera::v1::ReportMetricsRequest report;
  report.set_worker_id("w0");
  chimera::v1::StepTimeline& timeline = *report.mutable_metrics()->mutable_timeline();
  for (int i = 0; i < 480000; ++i) {
    timeline.add_op_start_seconds(i);
    timeline.add_op_end_seconds(i + 0.5);
  }
  ASSERT_GT(report.ByteSizeLong(), 7u << 20);
  chimera::v1::ReportMetricsResponse response;
  const absl::Time sent = absl::Now();
  const grpc::Status metrics =
      workers->ReportMetrics(Context(kWorkerToken).get(), report, &response);
  EXPECT_EQ(metrics.error_code(), grpc::StatusCode::NOT_FOUND) << metrics.error_message();
  EXPECT_LT(absl::Now() - sent, absl::Seconds(5));
  for (int i = 0; i < 120000; ++i) timeline.add_op_start_seconds(i);
  const grpc::Status beyond =
      workers->ReportMetrics(Context(kWorkerToken).get(), report, &response);
  EXPECT_EQ(beyond.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(beyond.error_message(), HasSubstr("8388608"));

  // A job of the largest size jobspec allows still gets the validator's word.
  chimera::v1::TrainJob large = Manifest(2);
  large.mutable_metadata()->set_name(std::string(100 << 10, 'x'));
  EXPECT_EQ(coordinator.Submit(large).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(coordinator.Submit(Manifest(2)).ok());
}

TEST_F(CoordinatorServiceTest, ListJobsPagesThroughEveryJobOnceInSubmissionOrder) {
  Coordinator coordinator(db());
  std::vector<std::string> submitted;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<chimera::v1::Job> job = coordinator.Submit(Manifest(2));
    ASSERT_TRUE(job.ok()) << job.status();
    submitted.push_back(job->id());
  }
  chimera::v1::ListJobsRequest request;
  request.set_page_size(2);
  std::vector<std::string> listed;
  int pages = 0;
  do {
    chimera::v1::ListJobsResponse page;
    const grpc::Status status =
        coordinator.jobs().ListJobs(Context(kClientToken).get(), request, &page);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_LE(page.jobs_size(), 2);
    for (const chimera::v1::Job& job : page.jobs()) listed.push_back(job.id());
    request.set_page_token(page.next_page_token());
    ASSERT_LT(++pages, 10) << "the pages do not end";
  } while (!request.page_token().empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(listed, submitted);
}

TEST_F(CoordinatorServiceTest, ListJobsRefusesABadPageSizeOrTokenNamingIt) {
  Coordinator coordinator(db());
  ASSERT_TRUE(coordinator.Submit(Manifest(2)).ok());
  const auto list = [&](int page_size, const std::string& token) {
    chimera::v1::ListJobsRequest request;
    request.set_page_size(page_size);
    request.set_page_token(token);
    chimera::v1::ListJobsResponse response;
    return coordinator.jobs().ListJobs(Context(kClientToken).get(), request,
                                       &response);
  };
  for (const int size : {-1, 1001}) {
    const grpc::Status status = list(size, "");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << size;
    EXPECT_THAT(status.error_message(),
                HasSubstr(absl::StrCat("page_size: ", size, " must be in [0, 1000]")));
  }
  for (const std::string token : {"x", "-3", "0"}) {
    const grpc::Status status = list(0, token);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << token;
    EXPECT_THAT(status.error_message(), HasSubstr("page_token"));
  }
}

TEST_F(CoordinatorServiceTest, RegistrationsNoRealWorkerSendsAreRefusedFieldByField) {
  Coordinator coordinator(db());
  auto stub = chimera::v1::WorkerService::NewStub(
      grpc::CreateChannel(coordinator.address(), grpc::InsecureChannelCredentials()));
  chimera::v1::RegisterWorkerRequest request;
  request.set_worker_id(std::string(300, 'w'));
  request.set_incarnation(7);
  request.set_memory_bytes(-1);
  request.add_devices()->set_kind("tpu");
  request.mutable_devices(0)->set_peak_flops(-1);
  request.mutable_task()->set_rank(-1);
  request.mutable_task()->set_state(chimera::v1::TASK_STATE_READY);
  chimera::v1::RegisterWorkerResponse response;
  const grpc::Status status =
      stub->RegisterWorker(Context(kWorkerToken).get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("workerId: has 300 characters; at most 253"));
  EXPECT_THAT(status.error_message(), HasSubstr("memoryBytes: -1 must be > 0"));
  EXPECT_THAT(status.error_message(), HasSubstr("devices[0].kind: 'tpu' is not one of cpu, gpu"));
  EXPECT_THAT(status.error_message(),
              HasSubstr("devices[0].peakFlops: -1 must be finite and >= 0"));
  EXPECT_THAT(status.error_message(), HasSubstr("host: is required"));
  EXPECT_THAT(status.error_message(), HasSubstr("task.jobId: is required"));
  EXPECT_THAT(status.error_message(), HasSubstr("task.attempt: 0 must be >= 1"));
  EXPECT_THAT(status.error_message(), HasSubstr("task.rank: -1 must be >= 0"));
  EXPECT_THAT(status.error_message(),
              HasSubstr("task.state: TASK_STATE_READY is not one of RUNNING, "
                        "SUCCEEDED, FAILED, STOPPED"));
}

// Other workers dial a worker's host joined with a port, and `chimera
// workers` prints it: a port or a line break in it used to be stored.
TEST_F(CoordinatorServiceTest, AWorkerHostThatIsNoHostNameOrAddressIsRefusedNamingIt) {
  Coordinator coordinator(db());
  auto stub = chimera::v1::WorkerService::NewStub(
      grpc::CreateChannel(coordinator.address(), grpc::InsecureChannelCredentials()));
  using HostAndShown = std::pair<std::string, std::string>;
  for (const auto& [host, shown] : {HostAndShown{"127.0.0.1:80", "127.0.0.1:80"},
                                    HostAndShown{"evil\nhost", "evil\\nhost"},
                                    HostAndShown{"[::1]", "[::1]"}}) {
    chimera::v1::RegisterWorkerRequest request;
    request.set_worker_id("w0");
    request.set_incarnation(7);
    request.set_memory_bytes(1 << 30);
    request.add_devices()->set_kind("cpu");
    request.set_host(host);
    chimera::v1::RegisterWorkerResponse response;
    const grpc::Status status =
        stub->RegisterWorker(Context(kWorkerToken).get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << shown;
    EXPECT_THAT(status.error_message(),
                HasSubstr("host: '" + shown + "' is not a host name or an IP address"));
  }
  chimera::v1::ListWorkersResponse workers;
  ASSERT_TRUE(coordinator.jobs()
                  .ListWorkers(Context(kClientToken).get(), chimera::v1::ListWorkersRequest(),
                               &workers)
                  .ok());
  EXPECT_EQ(workers.workers_size(), 0);
}

TEST_F(CoordinatorServiceTest, JobRunsThroughRendezvousStepsAndSuccess) {
  Coordinator coordinator(db());
  FakeWorker first(coordinator.address(), "w0");
  FakeWorker second(coordinator.address(), "w1");
  absl::StatusOr<chimera::v1::Job> job = coordinator.Submit(Manifest(2));
  ASSERT_TRUE(job.ok()) << job.status();

  // Whichever worker got rank 0 hosts the store; the other waits for it.
  std::optional<chimera::v1::Assignment> a = first.Next();
  ASSERT_TRUE(a.has_value());
  FakeWorker& rank0 = a->start().program().rank() == 0 ? first : second;
  FakeWorker& rank1 = &rank0 == &first ? second : first;
  chimera::v1::StartTask task0 = a->start();
  if (&rank0 != &first) {
    task0 = rank0.Next()->start();
  }
  EXPECT_EQ(task0.rendezvous().store_address(), "");
  ASSERT_TRUE(rank0.ReportState(task0, chimera::v1::TASK_STATE_READY, "127.0.0.1:4321").ok());
  chimera::v1::StartTask task1 = &rank1 == &first ? a->start() : rank1.Next()->start();
  if (task1.program().rank() == 0) task1 = rank1.Next()->start();
  EXPECT_EQ(task1.rendezvous().store_address(), "127.0.0.1:4321");
  EXPECT_EQ(coordinator.Get(job->id()).status().state(), chimera::v1::JOB_STATE_RUNNING);

  ASSERT_TRUE(rank0.ReportStep(task0, 0, 0.0).ok());
  ASSERT_TRUE(rank1.ReportStep(task1, 0, 2.5).ok());
  ASSERT_TRUE(rank0.ReportState(task0, chimera::v1::TASK_STATE_SUCCEEDED).ok());
  ASSERT_TRUE(rank1.ReportState(task1, chimera::v1::TASK_STATE_SUCCEEDED).ok());
  chimera::v1::Job done = coordinator.AwaitState(job->id(), chimera::v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.status().state(), chimera::v1::JOB_STATE_SUCCEEDED);
  EXPECT_DOUBLE_EQ(done.status().last_step().loss(), 2.5);

  // A watcher of the ended job still gets its step and its final state.
  chimera::v1::WatchJobRequest watch;
  watch.set_job_id(job->id());
  auto context = Context(kClientToken);
  auto reader = coordinator.jobs().WatchJob(context.get(), watch);
  chimera::v1::JobEvent event;
  std::vector<chimera::v1::JobEvent> events;
  while (reader->Read(&event)) events.push_back(event);
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].has_step());
  EXPECT_EQ(events[1].status().state(), chimera::v1::JOB_STATE_SUCCEEDED);
}

// A job's status is read by every `chimera status` and kept in the store: a
// task's failure message of megabytes used to land there whole.
TEST_F(CoordinatorServiceTest, ALongTaskMessageIsCutAtACharacterInTheJobsStatus) {
  Coordinator coordinator(db());
  FakeWorker worker(coordinator.address(), "w0");
  absl::StatusOr<chimera::v1::Job> job = coordinator.Submit(Manifest(1));
  ASSERT_TRUE(job.ok()) << job.status();
  std::optional<chimera::v1::Assignment> start = worker.Next();
  ASSERT_TRUE(start.has_value() && start->has_start());
  // 3-byte characters: byte 4096 falls inside one.
  std::string message;
  for (int i = 0; i < 5000; ++i) message += "\xe2\x82\xac";
  ASSERT_TRUE(worker.ReportState(start->start(), chimera::v1::TASK_STATE_FAILED, "", message).ok());

  const chimera::v1::Job failed = coordinator.AwaitState(job->id(), chimera::v1::JOB_STATE_FAILED);
  ASSERT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  ASSERT_LT(failed.status().message().size(), 4200u) << "the message was kept whole";
  // 1365 whole characters (4095 bytes) of it, then the mark.
  EXPECT_EQ(failed.status().message(),
            absl::StrCat("rank 0 on worker w0 failed: ", message.substr(0, 4095),
                         " ... (cut to 4096 bytes)"));
}

TEST_F(CoordinatorServiceTest, FollowersHoldNoThreadWhileTheyWaitAndAllSeeTheEnd) {
  Coordinator coordinator(db());
  absl::StatusOr<chimera::v1::Job> job = coordinator.Submit(Manifest(2));
  ASSERT_TRUE(job.ok()) << job.status();
  const int64_t threads_before = ProcStatusOf(coordinator.pid(), "Threads:");
  ASSERT_GT(threads_before, 0);

  // With no worker the job stays PENDING: every follower waits.
  constexpr int kFollowers = 200;
  struct Follower {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<chimera::v1::JobEvent>> events;
  };
  std::vector<Follower> followers;
  chimera::v1::WatchJobRequest watch;
  watch.set_job_id(job->id());
  for (int i = 0; i < kFollowers; ++i) {
    Follower& follower = followers.emplace_back();
    follower.context = Context(kClientToken);
    follower.events = coordinator.jobs().WatchJob(follower.context.get(), watch);
    chimera::v1::JobEvent first;
    ASSERT_TRUE(follower.events->Read(&first)) << "follower " << i;
    EXPECT_EQ(first.status().state(), chimera::v1::JOB_STATE_PENDING);
  }
  // A thread per stream would add kFollowers.
  EXPECT_LT(ProcStatusOf(coordinator.pid(), "Threads:"), threads_before + kFollowers / 10);

  chimera::v1::StopJobRequest stop;
  stop.set_job_id(job->id());
  chimera::v1::Job stopped;
  ASSERT_TRUE(coordinator.jobs().StopJob(Context(kClientToken).get(), stop, &stopped).ok());
  for (Follower& follower : followers) {
    chimera::v1::JobEvent event, last;
    while (follower.events->Read(&event)) last = event;
    EXPECT_EQ(last.status().state(), chimera::v1::JOB_STATE_STOPPED);
    EXPECT_TRUE(follower.events->Finish().ok());
  }
}

TEST_F(CoordinatorServiceTest, SilentWorkerFailsItsJobNamingItAndTheOtherIsFreed) {
  Coordinator coordinator(db());
  FakeWorker first(coordinator.address(), "w0");
  FakeWorker second(coordinator.address(), "w1");
  absl::StatusOr<chimera::v1::Job> job = coordinator.Submit(Manifest(2));
  ASSERT_TRUE(job.ok());
  coordinator.AwaitState(job->id(), chimera::v1::JOB_STATE_RUNNING);
  second.GoSilent();
  chimera::v1::Job failed = coordinator.AwaitState(job->id(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(), HasSubstr("worker w1"));
  EXPECT_THAT(failed.status().message(), HasSubstr("heartbeats"));
  chimera::v1::ListWorkersResponse workers;
  ASSERT_TRUE(coordinator.jobs()
                  .ListWorkers(Context(kClientToken).get(), chimera::v1::ListWorkersRequest(),
                               &workers)
                  .ok());
  ASSERT_EQ(workers.workers_size(), 2);
  EXPECT_EQ(workers.workers(0).state(), chimera::v1::WORKER_STATE_IDLE);
  EXPECT_EQ(workers.workers(1).state(), chimera::v1::WORKER_STATE_DEAD);
}

TEST_F(CoordinatorServiceTest, StoppingARunningJobSendsStopsAndFreesTheWorkers) {
  Coordinator coordinator(db());
  FakeWorker first(coordinator.address(), "w0");
  FakeWorker second(coordinator.address(), "w1");
  absl::StatusOr<chimera::v1::Job> job = coordinator.Submit(Manifest(2));
  ASSERT_TRUE(job.ok());
  coordinator.AwaitState(job->id(), chimera::v1::JOB_STATE_RUNNING);
  chimera::v1::StopJobRequest stop;
  stop.set_job_id(job->id());
  chimera::v1::Job stopped;
  ASSERT_TRUE(coordinator.jobs().StopJob(Context(kClientToken).get(), stop, &stopped).ok());
  EXPECT_EQ(stopped.status().state(), chimera::v1::JOB_STATE_STOPPED);
  // The rank-0 worker got its start and then its stop; the other only a stop.
  int stops = 0;
  for (FakeWorker* worker : {&first, &second}) {
    while (std::optional<chimera::v1::Assignment> next = worker->Next(absl::Seconds(2))) {
      if (next->has_stop()) ++stops;
    }
  }
  EXPECT_EQ(stops, 2);
}

TEST_F(CoordinatorServiceTest, RestartKeepsTheQueueAndWorkersRegisterAgain) {
  std::string first_id, second_id;
  {
    Coordinator coordinator(db());
    first_id = coordinator.Submit(Manifest(2))->id();
    second_id = coordinator.Submit(Manifest(4))->id();
  }
  Coordinator restarted(db());
  EXPECT_EQ(restarted.JobCount(), 2);
  EXPECT_EQ(restarted.Get(first_id).status().state(), chimera::v1::JOB_STATE_PENDING);
  EXPECT_EQ(restarted.Get(second_id).status().state(), chimera::v1::JOB_STATE_PENDING);
  FakeWorker first(restarted.address(), "w0");
  FakeWorker second(restarted.address(), "w1");
  EXPECT_EQ(restarted.AwaitState(first_id, chimera::v1::JOB_STATE_RUNNING).status().state(),
            chimera::v1::JOB_STATE_RUNNING);
}

}  // namespace
}  // namespace chimera
