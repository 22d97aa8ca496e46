#include "client/machine_measurement.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/environment.h"
#include "common/file_reader.h"
#include "common/status_macros.h"
#include "net/child_process.h"

namespace chimera::client {
namespace {

// The most of a measurement's log read back for its last line.
constexpr uint64_t kMaxLogBytes = 1 << 20;

// ": " and the last line of `log`, where it has one: what went wrong.
std::string LastLine(const std::string& log) {
  const absl::StatusOr<std::string> text = ReadTextFile(log, kMaxLogBytes);
  if (!text.ok()) return "";
  const std::string trimmed(absl::StripTrailingAsciiWhitespace(*text));
  if (trimmed.empty()) return "";
  return absl::StrCat(": ", trimmed.substr(trimmed.rfind('\n') + 1));
}

absl::Status Measure(const MeasurementRequest& request,
                     const MachineMeasurement& measurement,
                     const std::string& out) {
  std::vector<std::string> argv = {request.worker_binary};
  argv.insert(argv.end(), measurement.arguments.begin(),
              measurement.arguments.end());
  argv.insert(argv.end(), {"--out", out});
  net::ChildProcess process(argv, /*working_dir=*/"", request.log_file);
  if (!process.started()) {
    return absl::InternalError(
        absl::StrCat("cannot start ", request.worker_binary));
  }
  const int code = process.Wait(measurement.timeout);
  if (code == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(measurement.what, " failed (",
                   process.timed_out()
                       ? absl::StrCat("not done in ",
                                      absl::FormatDuration(measurement.timeout))
                       : absl::StrCat("exit ", code),
                   ")", LastLine(request.log_file), "; its log is ",
                   request.log_file, measurement.alternative));
}

}  // namespace

uint64_t StableHash(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (const unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string FileVersion(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  const auto modified = std::filesystem::last_write_time(path, error);
  return absl::StrCat(path, " ", error ? 0 : size, " ",
                      error ? 0 : modified.time_since_epoch().count());
}

std::string HostDescription() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) {
    std::snprintf(name, sizeof(name), "unknown");
  }
  return absl::StrCat(
      name, " OPENBLAS_CORETYPE=", OrEnvironment("", "OPENBLAS_CORETYPE"));
}

std::optional<std::string> MeasurementCacheDirectory(
    const std::string& folder) {
  const std::string xdg = OrEnvironment("", "XDG_CACHE_HOME");
  if (!xdg.empty()) return absl::StrCat(xdg, "/chimera/", folder);
  const std::string home = OrEnvironment("", "HOME");
  if (!home.empty()) return absl::StrCat(home, "/.cache/chimera/", folder);
  return std::nullopt;
}

absl::StatusOr<CachedFile> MeasureOrReuse(
    const MeasurementRequest& request, const MachineMeasurement& measurement,
    const std::function<absl::Status(const std::string& path)>& read) {
  const std::optional<std::string> cache =
      MeasurementCacheDirectory(measurement.cache_folder);
  std::error_code error;
  if (cache) std::filesystem::create_directories(*cache, error);
  const std::string directory =
      cache && !error
          ? *cache
          : std::filesystem::path(request.log_file).parent_path().string();
  const std::string path = directory + "/" + measurement.name;
  if (!request.fresh && std::filesystem::exists(path) && read(path).ok()) {
    return CachedFile{path, /*cached=*/true};
  }
  const std::string partial = absl::StrCat(path, ".", ::getpid(), ".partial");
  request.before_measuring();
  RETURN_IF_ERROR(Measure(request, measurement, partial));
  std::filesystem::rename(partial, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot move ", partial, " to ",
                                            path, ": ", error.message()));
  }
  RETURN_IF_ERROR(read(path));
  return CachedFile{path, /*cached=*/false};
}

}  // namespace chimera::client
