// How the CLI finds the job a user means: by its id, its name, or the
// start of its id or of the id's random part. A job id is NAME-XXXXXXXX
// (eight hex digits), so `gpt-chimera`, `gpt-chimera-1a` and `1a2b` may all
// name the job gpt-chimera-1a2b3c4d.
#ifndef CHIMERA_CLIENT_JOB_REFERENCE_H_
#define CHIMERA_CLIENT_JOB_REFERENCE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chimera/v1/job.pb.h"
#include "client/coordinator_client.h"

namespace chimera::client {

// The help of a command's job argument.
inline constexpr char kJobReferenceHelp[] =
    "Job: its id, its name, or the start of its id or of the id's random part";

// The jobs of `jobs` that `reference` names: the one whose id it is, else
// every job it is the name of or the start of the id (or of the id's random
// part) of.
std::vector<chimera::v1::Job> JobsNamedBy(
    const std::string& reference, const std::vector<chimera::v1::Job>& jobs);

// The id of the one job `reference` names. NOT_FOUND when none does;
// INVALID_ARGUMENT listing the candidates when several do.
absl::StatusOr<std::string> ResolveJobId(CoordinatorClient& client,
                                         const std::string& reference);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_JOB_REFERENCE_H_
