#include "client/local_profile.h"

#include <filesystem>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "client/machine_measurement.h"
#include "common/field_errors.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "planner/model_profile.h"

namespace chimera::client {
namespace {

// Profiling times every layer at a few micro-batch sizes: seconds for the
// examples, minutes for a large model on a slow CPU.
constexpr absl::Duration kProfileTimeout = absl::Minutes(30);

// What `chimera-worker profile` reads of the job: the model, the largest
// micro-batch size it times, the optimizer whose step it times, threads per
// worker and the device.
chimera::v1::TrainJob ProfiledPart(const chimera::v1::TrainJob& job) {
  chimera::v1::TrainJob part;
  auto* spec = part.mutable_spec();
  *spec->mutable_model() = job.spec().model();
  spec->mutable_training()->set_micro_batch_size(
      job.spec().training().micro_batch_size());
  *spec->mutable_training()->mutable_optimizer() =
      job.spec().training().optimizer();
  spec->mutable_resources()->set_threads_per_worker(
      job.spec().resources().threads_per_worker());
  spec->mutable_resources()->set_device(job.spec().resources().device());
  return part;
}

std::string Deterministic(const google::protobuf::Message& message) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

absl::Status ReadProfile(const chimera::v1::TrainJob& job,
                         const std::string& path,
                         chimera::v1::ModelProfile* profile) {
  *profile = {};
  const FieldErrors errors =
      planner::LoadProfileFile(path, job.spec().model().num_layers(), profile);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", errors.ToStatus().message()));
  }
  return absl::OkStatus();
}

}  // namespace

ProfileBuild CurrentBuild(const std::string& worker_binary,
                          const chimera::v1::TrainJob& job,
                          const std::string& data_root) {
  ProfileBuild build;
  build.worker_binary = FileVersion(worker_binary);
  const std::string& modules = job.spec().model().modules();
  if (!modules.empty()) {
    const std::filesystem::path directory =
        std::filesystem::path(data_root.empty() ? "." : data_root) / modules;
    std::error_code error;
    std::set<std::string> files;
    for (const auto& entry :
         std::filesystem::directory_iterator(directory, error)) {
      files.insert(entry.path().string());
    }
    for (const std::string& file : files) {
      absl::StrAppend(&build.model_files, FileVersion(file), "\n");
    }
  }
  build.host = HostDescription();
  return build;
}

std::string ProfileCacheName(const chimera::v1::TrainJob& job,
                             const ProfileBuild& build) {
  const std::string key =
      absl::StrCat(Deterministic(ProfiledPart(job)), "\n", build.worker_binary,
                   "\n", build.host, "\n", build.model_files);
  return absl::StrFormat("%s-%016x.json", job.spec().model().family(),
                         StableHash(key));
}

absl::StatusOr<Measured<chimera::v1::ModelProfile>> MeasureOrReuseProfile(
    const chimera::v1::TrainJob& job, const std::string& job_file,
    const std::string& data_root, const MeasurementRequest& request) {
  MachineMeasurement measurement;
  measurement.cache_folder = kProfileCacheFolder;
  measurement.name = ProfileCacheName(
      job, CurrentBuild(request.worker_binary, job, data_root));
  measurement.arguments = {"profile", "--job", job_file, "--data-root",
                           data_root};
  measurement.timeout = kProfileTimeout;
  measurement.what = "timing the model on this machine for the planner";
  measurement.alternative =
      " (chimera run --no-profile plans from the analytic model instead)";
  Measured<chimera::v1::ModelProfile> measured;
  ASSIGN_OR_RETURN(
      measured.file,
      MeasureOrReuse(request, measurement, [&](const std::string& path) {
        return ReadProfile(job, path, &measured.value);
      }));
  return measured;
}

}  // namespace chimera::client
