#include "coordinator/job_event_streams.h"

#include <algorithm>
#include <deque>
#include <string>

#include "coordinator/grpc_util.h"
#include "coordinator/job_states.h"

namespace chimera::coordinator {

class JobEventStreams::Stream final : public grpc::ServerWriteReactor<chimera::v1::JobEvent> {
 public:
  Stream(JobEventStreams* streams, const chimera::v1::WatchJobRequest& request,
         const grpc::Status& refused)
      : streams_(streams),
        job_id_(request.job_id()),
        doorbell_(std::make_shared<Doorbell>([this] { Pump(); })) {
    if (!refused.ok()) {
      absl::MutexLock lock(&mutex_);
      FinishLocked(refused);
      return;
    }
    streams_->Add(doorbell_);
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mutex_);
      writing_ = false;
      if (!ok) {
        FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "job event stream broke"));
        return;
      }
    }
    Pump();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mutex_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    doorbell_->Detach();
    streams_->Remove(doorbell_.get());
    delete this;
  }

 private:
  // Starts writing the next event the client has not seen, unless a write
  // is under way; finishes once the job has ended and everything is written.
  void Pump() {
    absl::MutexLock lock(&mutex_);
    if (writing_ || finished_) return;
    if (streams_->stopping_->HasBeenNotified()) {
      // UNAVAILABLE tells the client to follow again (a restarted coordinator).
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the coordinator is shutting down"));
      return;
    }
    if (pending_.empty()) {
      const grpc::Status caught_up = CatchUpLocked();
      if (!caught_up.ok()) {
        FinishLocked(caught_up);
        return;
      }
    }
    if (pending_.empty()) {
      if (ended_) FinishLocked(grpc::Status::OK);
      return;
    }
    writing_ = true;
    sending_ = std::move(pending_.front());
    pending_.pop_front();
    StartWrite(&sending_);
  }

  // Queues the steps recorded since the last one queued, then the job's
  // status if it changed. The status is read first, so that a job seen
  // ended has every step queued before its final status.
  grpc::Status CatchUpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    JobManager& jobs = *streams_->jobs_;
    absl::StatusOr<chimera::v1::Job> job = jobs.Get(job_id_);
    if (!job.ok()) return ToGrpcStatus(job.status());
    absl::StatusOr<std::vector<chimera::v1::StepSummary>> steps =
        jobs.Steps(job_id_, last_step_);
    if (!steps.ok()) return ToGrpcStatus(steps.status());
    for (chimera::v1::StepSummary& step : *steps) {
      last_step_ = std::max(last_step_, step.step());
      *pending_.emplace_back().mutable_step() = std::move(step);
    }
    std::string status = job->status().SerializeAsString();
    if (status != last_status_) {
      *pending_.emplace_back().mutable_status() = job->status();
      last_status_ = std::move(status);
    }
    ended_ = IsTerminal(job->status().state());
    return grpc::Status::OK;
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  JobEventStreams* const streams_;
  const std::string job_id_;
  const std::shared_ptr<Doorbell> doorbell_;
  absl::Mutex mutex_;
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  bool ended_ ABSL_GUARDED_BY(mutex_) = false;
  int last_step_ ABSL_GUARDED_BY(mutex_) = -1;
  std::string last_status_ ABSL_GUARDED_BY(mutex_);
  std::deque<chimera::v1::JobEvent> pending_ ABSL_GUARDED_BY(mutex_);
  chimera::v1::JobEvent sending_ ABSL_GUARDED_BY(mutex_);
};

JobEventStreams::JobEventStreams(JobManager* jobs, const absl::Notification* stopping)
    : jobs_(jobs), stopping_(stopping), ringer_([this] { RingOnEveryChange(); }) {}

JobEventStreams::~JobEventStreams() {
  {
    absl::MutexLock lock(&mutex_);
    closing_ = true;
  }
  jobs_->WakeWaiters();
  ringer_.join();
}

grpc::ServerWriteReactor<chimera::v1::JobEvent>* JobEventStreams::Open(
    const chimera::v1::WatchJobRequest& request, const grpc::Status& refused) {
  return new Stream(this, request, refused);
}

void JobEventStreams::Add(std::shared_ptr<Doorbell> doorbell) {
  absl::MutexLock lock(&mutex_);
  doorbells_.push_back(std::move(doorbell));
}

void JobEventStreams::Remove(const Doorbell* doorbell) {
  absl::MutexLock lock(&mutex_);
  auto it = std::find_if(doorbells_.begin(), doorbells_.end(),
                         [doorbell](const auto& open) { return open.get() == doorbell; });
  if (it == doorbells_.end()) return;
  // Order does not matter: swap with the last for O(1) removal.
  std::swap(*it, doorbells_.back());
  doorbells_.pop_back();
}

void JobEventStreams::RingOnEveryChange() {
  uint64_t seen = jobs_->version();
  while (true) {
    seen = jobs_->WaitForChange(seen, absl::InfiniteDuration());
    std::vector<std::shared_ptr<Doorbell>> open;
    bool closing;
    {
      absl::MutexLock lock(&mutex_);
      open = doorbells_;
      closing = closing_;
    }
    // Outside mutex_: a rung stream may finish and remove itself.
    for (const std::shared_ptr<Doorbell>& doorbell : open) doorbell->Ring();
    if (closing || stopping_->HasBeenNotified()) return;
  }
}

}  // namespace chimera::coordinator
