#include "coordinator/background_planner.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"

namespace chimera::coordinator {

BackgroundPlanner::BackgroundPlanner(absl::Duration budget)
    : budget_(budget) {}

BackgroundPlanner::~BackgroundPlanner() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
}

void BackgroundPlanner::Start(const std::string& key, Search search) {
  {
    absl::MutexLock lock(&mutex_);
    if (key_ == key && (running_ || result_)) return;
    if (running_) {
      cancel_ = true;
      return;
    }
    key_ = key;
    result_.reset();
    running_ = true;
  }
  // The last search has ended (running_ was false): joining is immediate.
  if (thread_.joinable()) thread_.join();
  cancel_ = false;
  thread_ = std::thread(&BackgroundPlanner::Run, this, std::move(search),
                        MonotonicNow() + budget_);
}

void BackgroundPlanner::Run(Search search, absl::Time deadline) {
  absl::StatusOr<Launch> launch = search(
      [this, deadline] { return cancel_ || MonotonicNow() >= deadline; });
  if (absl::IsCancelled(launch.status()) && !cancel_) {
    launch = absl::DeadlineExceededError(absl::StrCat(
        "planning gave up after ", absl::FormatDuration(budget_),
        "; fix spec.parallelism (schedule, pipeline, data) so that less is "
        "searched, or give the coordinator more time (--planning-timeout)"));
  }
  absl::MutexLock lock(&mutex_);
  running_ = false;
  // A cancelled search's result answers nothing.
  if (!cancel_) result_ = std::move(launch);
}

std::optional<absl::StatusOr<Launch>> BackgroundPlanner::Take(
    const std::string& key, absl::Duration wait) {
  absl::MutexLock lock(&mutex_);
  if (key_ != key) return std::nullopt;
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return !running_;
  };
  mutex_.AwaitWithTimeout(absl::Condition(&ended), wait);
  std::optional<absl::StatusOr<Launch>> result = std::move(result_);
  result_.reset();
  return result;
}

}  // namespace chimera::coordinator
