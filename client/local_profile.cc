#include "client/local_profile.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/environment.h"
#include "common/field_errors.h"
#include "common/file_reader.h"
#include "common/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "net/child_process.h"
#include "planner/model_profile.h"

namespace chimera::client {
namespace {

// Profiling times every layer at a few micro-batch sizes: seconds for the
// examples, minutes for a large model on a slow CPU.
constexpr absl::Duration kProfileTimeout = absl::Minutes(30);
// The most of the profiler's log read back for its last line.
constexpr uint64_t kMaxLogBytes = 1 << 20;

// FNV-1a: a stable hash (unlike std::hash or absl::Hash, the same in every
// process and build), which is all a cache key needs.
uint64_t StableHash(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (const unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

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

// `path`, its size and its modification time (zeros where it cannot be
// read): what changes when the file is rewritten.
std::string FileVersion(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  const auto modified = std::filesystem::last_write_time(path, error);
  return absl::StrCat(path, " ", error ? 0 : size, " ",
                      error ? 0 : modified.time_since_epoch().count());
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

absl::StatusOr<chimera::v1::ModelProfile> ReadProfile(
    const chimera::v1::TrainJob& job, const std::string& path) {
  chimera::v1::ModelProfile profile;
  const FieldErrors errors =
      planner::LoadProfileFile(path, job.spec().model().num_layers(), &profile);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", errors.ToStatus().message()));
  }
  return profile;
}

// ": " and the last line of `log`, where it has one: what went wrong.
std::string LastLine(const std::string& log) {
  const absl::StatusOr<std::string> text = ReadTextFile(log, kMaxLogBytes);
  if (!text.ok()) return "";
  const std::string trimmed(absl::StripTrailingAsciiWhitespace(*text));
  if (trimmed.empty()) return "";
  return absl::StrCat(": ", trimmed.substr(trimmed.rfind('\n') + 1));
}

// Runs the worker's profiler on the job, writing `out`.
absl::Status Measure(const ProfileRequest& request, const std::string& out) {
  net::ChildProcess profiler(
      {request.worker_binary, "profile", "--job", request.job_file,
       "--data-root", request.data_root, "--out", out},
      /*working_dir=*/"", request.log_file);
  if (!profiler.started()) {
    return absl::InternalError(
        absl::StrCat("cannot start ", request.worker_binary));
  }
  const int code = profiler.Wait(kProfileTimeout);
  if (code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "timing the model on this machine for the planner failed (",
      profiler.timed_out()
          ? absl::StrCat("not done in ", absl::FormatDuration(kProfileTimeout))
          : absl::StrCat("exit ", code),
      ")", LastLine(request.log_file), "; its log is ", request.log_file,
      " (chimera run --no-profile plans from the analytic model instead)"));
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
  build.host = absl::StrCat(HostName(), " OPENBLAS_CORETYPE=",
                            OrEnvironment("", "OPENBLAS_CORETYPE"));
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

std::optional<std::string> ProfileCacheDirectory() {
  const std::string xdg = OrEnvironment("", "XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/chimera/profiles";
  const std::string home = OrEnvironment("", "HOME");
  if (!home.empty()) return home + "/.cache/chimera/profiles";
  return std::nullopt;
}

absl::StatusOr<LocalProfile> MeasureOrReuseProfile(
    const chimera::v1::TrainJob& job, const ProfileRequest& request) {
  const std::string name = ProfileCacheName(
      job, CurrentBuild(request.worker_binary, job, request.data_root));
  const std::optional<std::string> cache = ProfileCacheDirectory();
  std::error_code error;
  if (cache) std::filesystem::create_directories(*cache, error);
  // Without a cache the profile lives beside the log, for this run only.
  const std::string directory =
      cache && !error
          ? *cache
          : std::filesystem::path(request.log_file).parent_path().string();
  const std::string path = directory + "/" + name;
  if (!request.fresh && std::filesystem::exists(path)) {
    // A damaged cache entry is measured again, not trusted.
    if (absl::StatusOr<chimera::v1::ModelProfile> cached =
            ReadProfile(job, path);
        cached.ok()) {
      return LocalProfile{*std::move(cached), path, /*cached=*/true};
    }
  }
  // Written beside its final name and renamed: a run stopped halfway, or
  // two runs at once, never leave half a profile under that name.
  const std::string partial = absl::StrCat(path, ".", ::getpid(), ".partial");
  request.before_measuring();
  RETURN_IF_ERROR(Measure(request, partial));
  std::filesystem::rename(partial, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot move the profile to ", path,
                                            ": ", error.message()));
  }
  ASSIGN_OR_RETURN(chimera::v1::ModelProfile profile, ReadProfile(job, path));
  return LocalProfile{std::move(profile), path, /*cached=*/false};
}

}  // namespace chimera::client
