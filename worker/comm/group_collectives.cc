#include "worker/comm/group_collectives.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera::worker {
namespace comm_internal {

struct QueuedCollective {
  Collective collective = Collective::kSum;
  at::Tensor tensor;
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);

  // Drops the tensor first: once the waiter sees `done`, the collective
  // holds no memory of the caller's (which the caller may then count freed).
  void Complete(absl::Status result) {
    tensor.reset();
    absl::MutexLock lock(&mu);
    status = std::move(result);
    done = true;
  }
};

}  // namespace comm_internal
namespace {

using comm_internal::QueuedCollective;

class QueuedOp final : public PendingOp {
 public:
  QueuedOp(std::shared_ptr<QueuedCollective> job, std::string description)
      : job_(std::move(job)), description_(std::move(description)) {}

  absl::Status Wait(absl::Duration timeout) override {
    absl::MutexLock lock(&job_->mu);
    const bool& done = job_->done;
    if (!job_->mu.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat(description_, " did not finish within ",
                       absl::FormatDuration(timeout)));
    }
    return job_->status;
  }

 private:
  std::shared_ptr<QueuedCollective> job_;
  std::string description_;
};

}  // namespace

std::string DescribeCollective(Collective collective, absl::string_view group) {
  absl::string_view name = "collective";
  switch (collective) {
    case Collective::kSum:
      name = "allreduce";
      break;
    case Collective::kAllGather:
      name = "all-gather";
      break;
    case Collective::kReduceScatterSum:
      name = "reduce-scatter";
      break;
  }
  return absl::StrCat(name, " in group '", group, "'");
}

GroupCollectives::GroupCollectives(GroupCollectivesOptions options, Run tcp)
    : options_(std::move(options)),
      tcp_(std::move(tcp)),
      thread_([this] { Serve(); }) {}

GroupCollectives::~GroupCollectives() {
  cancelled_.store(true);
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back(nullptr);  // wakes the thread and ends it
  }
  thread_.join();
}

std::unique_ptr<PendingOp> GroupCollectives::Start(Collective collective,
                                                   at::Tensor tensor) {
  auto job = std::make_shared<Job>();
  job->collective = collective;
  job->tensor = std::move(tensor);
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back(job);
  }
  return std::make_unique<QueuedOp>(
      std::move(job), DescribeCollective(collective, options_.group));
}

void GroupCollectives::Serve() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](std::deque<std::shared_ptr<Job>>* queue) {
            return !queue->empty();
          },
          &queue_));
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (job == nullptr) break;
    if (cancelled_.load()) {
      job->Complete(absl::CancelledError(absl::StrCat(
          DescribeCollective(job->collective, options_.group), " cancelled")));
      continue;
    }
    absl::Status status = Execute(*job);
    if (!status.ok()) {
      status = absl::Status(
          status.code(),
          absl::StrCat(DescribeCollective(job->collective, options_.group),
                       " failed: ", status.message()));
    }
    job->Complete(std::move(status));
  }
  // Whatever was queued behind the end marker.
  absl::MutexLock lock(&mu_);
  for (const auto& job : queue_) {
    if (job != nullptr) {
      job->Complete(absl::CancelledError(absl::StrCat(
          DescribeCollective(job->collective, options_.group), " cancelled")));
    }
  }
}

absl::Status GroupCollectives::Execute(const Job& job) {
  if (options_.size == 1) return absl::OkStatus();  // each is the identity
  RETURN_IF_ERROR(PrepareSharedMemory(job.tensor.nbytes()));
  if (tcp_only_) return tcp_(job.collective, job.tensor);
  switch (job.collective) {
    case Collective::kSum:
      return shared_->Sum(job.tensor, options_.timeout);
    case Collective::kAllGather:
      return shared_->AllGather(job.tensor, options_.timeout);
    case Collective::kReduceScatterSum:
      return shared_->ReduceScatterSum(job.tensor, options_.timeout);
  }
  return absl::InternalError("unknown collective");
}

absl::Status GroupCollectives::PrepareSharedMemory(size_t bytes) {
  if (tcp_only_ || (shared_ != nullptr && shared_->capacity() >= bytes)) {
    return absl::OkStatus();
  }
  // Each attempt rendezvouses under keys of its own: the members make the
  // same calls in the same order, so they agree on the count.
  SharedMemoryOptions shared_options;
  shared_options.enabled = options_.shared_memory;
  shared_options.timeout = options_.timeout;
  shared_options.cancelled = &cancelled_;
  shared_.reset();
  absl::StatusOr<std::unique_ptr<SharedMemoryCollectives>> joined =
      SharedMemoryCollectives::Join(
          options_.store, absl::StrCat(options_.key_prefix, "/", joins_++),
          options_.rank, options_.size, bytes, shared_options);
  if (absl::IsFailedPrecondition(joined.status())) {
    tcp_only_ = true;
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(joined.status());
  shared_ = std::move(*joined);
  shared_memory_in_use_.store(true);
  return absl::OkStatus();
}

}  // namespace chimera::worker
