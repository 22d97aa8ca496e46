#include "coordinator/job_event_streams.h"

#include <algorithm>
#include <deque>
#include <string>

#include "common/status_macros.h"
#include "coordinator/job_states.h"
#include "coordinator/rung_stream.h"

namespace chimera::coordinator {

class JobEventStreams::Stream final : public RungStream<chimera::v1::JobEvent> {
 public:
  // Finishes at once with `refused` when it is not OK.
  Stream(JobEventStreams* streams, const chimera::v1::WatchJobRequest& request,
         const grpc::Status& refused)
      : RungStream(streams->stopping_), streams_(streams), job_id_(request.job_id()) {
    if (!refused.ok()) {
      Refuse(refused);
      return;
    }
    streams_->Add(doorbell());
    Pump();
  }

 private:
  absl::StatusOr<std::optional<chimera::v1::JobEvent>> NextLocked() override {
    if (pending_.empty()) RETURN_IF_ERROR(CatchUpLocked());
    if (pending_.empty()) return std::nullopt;
    chimera::v1::JobEvent next = std::move(pending_.front());
    pending_.pop_front();
    return next;
  }

  // Once the job has ended and everything about it is written.
  bool CompleteLocked() override { return ended_ && pending_.empty(); }

  void Forget(const Doorbell& doorbell) override { streams_->Remove(&doorbell); }

  // Queues the steps recorded since the last one queued, then the job's
  // status if it changed. The status is read first, so that a job seen
  // ended has every step queued before its final status.
  absl::Status CatchUpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    JobManager& jobs = *streams_->jobs_;
    ASSIGN_OR_RETURN(chimera::v1::Job job, jobs.Get(job_id_));
    ASSIGN_OR_RETURN(std::vector<chimera::v1::StepSummary> steps,
                     jobs.Steps(job_id_, last_step_));
    for (chimera::v1::StepSummary& step : steps) {
      last_step_ = std::max(last_step_, step.step());
      *pending_.emplace_back().mutable_step() = std::move(step);
    }
    std::string status = job.status().SerializeAsString();
    if (status != last_status_) {
      *pending_.emplace_back().mutable_status() = job.status();
      last_status_ = std::move(status);
    }
    ended_ = IsTerminal(job.status().state());
    return absl::OkStatus();
  }

  JobEventStreams* const streams_;
  const std::string job_id_;
  bool ended_ ABSL_GUARDED_BY(mutex_) = false;
  int last_step_ ABSL_GUARDED_BY(mutex_) = -1;
  std::string last_status_ ABSL_GUARDED_BY(mutex_);
  std::deque<chimera::v1::JobEvent> pending_ ABSL_GUARDED_BY(mutex_);
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
