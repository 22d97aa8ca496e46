// A measurement of this machine that `chimera run` takes with a
// chimera-worker subcommand once and keeps in a cache, keyed by what it
// depends on: the model's profile (client/local_profile.h) and what a
// worker process pays on this host beyond its compute
// (client/local_host_costs.h).
//
//   MachineMeasurement measurement{.cache_folder = "hosts", .name = name,
//                                  .arguments = {"host-costs"}, ...};
//   ASSIGN_OR_RETURN(CachedFile file,
//                    MeasureOrReuse(request, measurement,
//                                   [&](const std::string& path) {
//                                     return ReadHostCosts(path, &costs);
//                                   }));
#ifndef CHIMERA_CLIENT_MACHINE_MEASUREMENT_H_
#define CHIMERA_CLIENT_MACHINE_MEASUREMENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace chimera::client {

// FNV-1a: a stable hash (unlike std::hash or absl::Hash, the same in every
// process and build), which is all a cache key needs.
uint64_t StableHash(const std::string& text);

// `path`, its size and its modification time (zeros where it cannot be
// read): what changes when the file is rewritten.
std::string FileVersion(const std::string& path);

// This host's name and OPENBLAS_CORETYPE (the matrix kernel chosen).
std::string HostDescription();

// Where measurements of `folder` are cached: $XDG_CACHE_HOME/chimera/FOLDER,
// else $HOME/.cache/chimera/FOLDER; none when neither is set.
std::optional<std::string> MeasurementCacheDirectory(const std::string& folder);

// What the caller of a measurement decides.
struct MeasurementRequest {
  std::string worker_binary;
  // Where the measuring run's log goes; without a cache the measured file
  // is kept beside it.
  std::string log_file;
  // Measure again even where the cache holds a readable file.
  bool fresh = false;
  // Called before a measurement starts (not for a cached file).
  std::function<void()> before_measuring = [] {};
};

// What is measured, and how.
struct MachineMeasurement {
  // The cache's folder ("profiles") and the file's name in it.
  std::string cache_folder;
  std::string name;
  // The worker's subcommand and its flags, to which "--out FILE" is added.
  std::vector<std::string> arguments;
  absl::Duration timeout;
  // What failed, for the error: "timing the model on this machine for the
  // planner", and what the user may do instead.
  std::string what;
  std::string alternative;
};

struct CachedFile {
  // The file the measurement was read from: in the cache, or beside the
  // log.
  std::string path;
  // Whether it came from the cache rather than a measurement just now.
  bool cached = false;
};

// A measurement's value and the file it was read from.
template <typename T>
struct Measured {
  T value;
  CachedFile file;
};

// Reads `measurement`'s cached file with `read` where it is readable and
// the request is not `fresh`; else runs the worker's command (its file
// written beside its final name and renamed, so that a run stopped halfway
// or two at once never leave half a file under it) and reads what it
// wrote. A damaged cache entry is measured again; INTERNAL naming the log
// when the command fails, or `read`'s error for what it wrote.
absl::StatusOr<CachedFile> MeasureOrReuse(
    const MeasurementRequest& request, const MachineMeasurement& measurement,
    const std::function<absl::Status(const std::string& path)>& read);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_MACHINE_MEASUREMENT_H_
