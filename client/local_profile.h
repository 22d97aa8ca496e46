// The measured model profile `chimera run` plans a local CPU job from: the
// analytic model is a GPU's, 2 to 10 times off for a CPU (docs/planner.md),
// so the run times the job's layers on this machine first with
// `chimera-worker profile` and hands the profile to its coordinator. The
// profile is cached, keyed by what its times depend on (the model, the
// micro-batch sizes and optimizer it times, threads per worker, the worker
// build and the host), so that only the first run of a model pays for it.
//
//   ASSIGN_OR_RETURN(Measured<chimera::v1::ModelProfile> local,
//                    MeasureOrReuseProfile(job, job_file, data_root, request));
//   client.Submit(job, local.value);
#ifndef CHIMERA_CLIENT_LOCAL_PROFILE_H_
#define CHIMERA_CLIENT_LOCAL_PROFILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/profile.pb.h"
#include "client/machine_measurement.h"

namespace chimera::client {

// What the profile's cache key holds besides the job.
struct ProfileBuild {
  // The worker binary's path, size and modification time: a rebuilt worker
  // may time differently.
  std::string worker_binary;
  // This host's name and OPENBLAS_CORETYPE (the matrix kernel chosen).
  std::string host;
  // A torchscript model's files (spec.model.modules): each one's name, size
  // and modification time, since the job names them only by their
  // directory; empty for the other families.
  std::string model_files;
};

// The worker binary, this host and `job`'s model files beneath `data_root`
// as ProfileBuild describes them.
ProfileBuild CurrentBuild(const std::string& worker_binary,
                          const chimera::v1::TrainJob& job,
                          const std::string& data_root);

// The cache file name for `job`'s profile: "<model family>-<16 hex digits>
// .json", the digits a hash of what the profile's times depend on.
std::string ProfileCacheName(const chimera::v1::TrainJob& job,
                             const ProfileBuild& build);

// The cache's folder of profiles (MeasurementCacheDirectory).
inline constexpr char kProfileCacheFolder[] = "profiles";

// `job`'s profile from the cache, or measured now by the worker binary (and
// cached), the job read from `job_file` and its data paths relative to
// `data_root`. INTERNAL naming the log file when the profiling run fails.
absl::StatusOr<Measured<chimera::v1::ModelProfile>> MeasureOrReuseProfile(
    const chimera::v1::TrainJob& job, const std::string& job_file,
    const std::string& data_root, const MeasurementRequest& request);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_LOCAL_PROFILE_H_
