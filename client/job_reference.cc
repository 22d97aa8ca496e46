#include "client/job_reference.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/job_output.h"
#include "common/status_macros.h"

namespace chimera::client {
namespace {

// The random part of a job id: what follows its name and a dash.
std::string RandomPart(const chimera::v1::Job& job) {
  const std::string& name = job.manifest().metadata().name();
  const std::string prefix = absl::StrCat(name, "-");
  return absl::StartsWith(job.id(), prefix) ? job.id().substr(prefix.size())
                                            : "";
}

}  // namespace

std::vector<chimera::v1::Job> JobsNamedBy(
    const std::string& reference, const std::vector<chimera::v1::Job>& jobs) {
  std::vector<chimera::v1::Job> named;
  if (reference.empty()) return named;
  for (const chimera::v1::Job& job : jobs) {
    if (job.id() == reference) return {job};
    if (job.manifest().metadata().name() == reference ||
        absl::StartsWith(job.id(), reference) ||
        absl::StartsWith(RandomPart(job), reference)) {
      named.push_back(job);
    }
  }
  return named;
}

absl::StatusOr<std::string> ResolveJobId(CoordinatorClient& client,
                                         const std::string& reference) {
  // An exact id, the common case in scripts, costs no listing.
  const absl::StatusOr<chimera::v1::Job> exact = client.Get(reference);
  if (exact.ok()) return exact->id();
  if (exact.status().code() != absl::StatusCode::kNotFound) {
    return exact.status();
  }
  ASSIGN_OR_RETURN(std::vector<chimera::v1::Job> jobs,
                   client.List(chimera::v1::JOB_STATE_UNSPECIFIED));
  const std::vector<chimera::v1::Job> named = JobsNamedBy(reference, jobs);
  if (named.size() == 1) return named.front().id();
  if (named.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no job '", reference, "' (by id, name, or the start of an id)"));
  }
  std::vector<std::string> candidates;
  for (const chimera::v1::Job& job : named) {
    candidates.push_back(
        absl::StrCat(job.id(), " (", JobStateName(job.status().state()), ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", reference, "' names ", named.size(),
      " jobs; give one of their ids: ", absl::StrJoin(candidates, ", ")));
}

}  // namespace chimera::client
