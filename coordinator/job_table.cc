#include "coordinator/job_table.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/job_states.h"

namespace chimera::coordinator {

using chimera::v1::Job;

absl::Status JobTable::Load() {
  ASSIGN_OR_RETURN(std::vector<Job> jobs, store_->ListLive());
  live_.clear();
  next_order_ = 0;
  for (Job& job : jobs) {
    const std::string id = job.id();
    live_[id] = {next_order_++, std::move(job)};
  }
  return absl::OkStatus();
}

absl::StatusOr<Job> JobTable::Get(const std::string& id) const {
  if (std::optional<Job> live = FindLive(id)) return *std::move(live);
  return store_->Get(id);
}

std::optional<Job> JobTable::FindLive(const std::string& id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  return it->second.job;
}

std::vector<Job> JobTable::Live(chimera::v1::JobState state) const {
  std::map<int64_t, const Job*> in_order;
  for (const auto& [id, live] : live_) {
    if (live.job.status().state() == state) in_order[live.order] = &live.job;
  }
  std::vector<Job> jobs;
  jobs.reserve(in_order.size());
  for (const auto& [order, job] : in_order) jobs.push_back(*job);
  return jobs;
}

std::optional<Job> JobTable::OldestLive(chimera::v1::JobState state) const {
  const LiveJob* oldest = nullptr;
  for (const auto& [id, live] : live_) {
    if (live.job.status().state() == state &&
        (oldest == nullptr || live.order < oldest->order)) {
      oldest = &live;
    }
  }
  if (oldest == nullptr) return std::nullopt;
  return oldest->job;
}

absl::Status JobTable::Writable() const {
  if (unrecorded_.empty()) return absl::OkStatus();
  const std::string message = absl::StrCat(
      "the job store has not recorded ", unrecorded_.size(),
      " job change", unrecorded_.size() == 1 ? "" : "s",
      " that already happened (the first: job ", unrecorded_.front().id(),
      " ", JobStateName(unrecorded_.front().status().state()), "; ",
      refused_.message(), "); no change is taken until it has");
  return absl::IsResourceExhausted(refused_)
             ? absl::ResourceExhaustedError(message)
             : absl::UnavailableError(message);
}

absl::Status JobTable::Put(const Job& job) {
  RETURN_IF_ERROR(Writable());
  return WriteThrough(job);
}

absl::Status JobTable::Record(const Job& job) {
  if (unrecorded_.empty()) {
    const absl::Status written = WriteThrough(job);
    if (written.ok()) return written;
    refused_ = written;
  }
  unrecorded_.push_back(job);
  return Writable();
}

int JobTable::Retry() {
  int written = 0;
  while (!unrecorded_.empty()) {
    const absl::Status status = WriteThrough(unrecorded_.front());
    if (!status.ok()) {
      refused_ = status;
      break;
    }
    CHIMERA_LOG(INFO) << "job " << unrecorded_.front().id() << " "
                      << JobStateName(unrecorded_.front().status().state())
                      << " is recorded at last";
    unrecorded_.pop_front();
    ++written;
  }
  if (unrecorded_.empty()) refused_ = absl::OkStatus();
  return written;
}

absl::Status JobTable::Delete(const std::string& id) {
  RETURN_IF_ERROR(Writable());
  return store_->Delete(id);
}

absl::Status JobTable::AppendStep(const std::string& id,
                                  const chimera::v1::StepSummary& step) {
  RETURN_IF_ERROR(Writable());
  return store_->AppendStep(id, step);
}

absl::Status JobTable::WriteThrough(const Job& job) {
  RETURN_IF_ERROR(store_->Put(job));
  if (IsTerminal(job.status().state())) {
    live_.erase(job.id());
    return absl::OkStatus();
  }
  auto [it, added] = live_.try_emplace(job.id());
  if (added) it->second.order = next_order_++;
  it->second.job = job;
  return absl::OkStatus();
}

}  // namespace chimera::coordinator
