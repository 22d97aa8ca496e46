// What a binary was built from, for --version and the build-info metrics:
// the release, the source commit (with "-dirty" for uncommitted changes;
// "unknown" outside a git checkout), the build type and the LibTorch version
// the build was configured against. Written at every build, so the commit
// never goes stale.
//
//   std::cout << DescribeBuild("chimera") << "\n";
//   // chimera 0.1.0 (commit 4a5cba7e1c2d, RelWithDebInfo, LibTorch 1.13.0)
#ifndef CHIMERA_COMMON_BUILD_INFO_H_
#define CHIMERA_COMMON_BUILD_INFO_H_

#include <string>

#include "absl/strings/string_view.h"

namespace chimera {

struct BuildInfo {
  const char* version;
  const char* git_commit;
  const char* build_type;
  const char* torch_version;
};

const BuildInfo& GetBuildInfo();

// "PROGRAM VERSION (commit C, BUILD_TYPE, LibTorch V)".
std::string DescribeBuild(absl::string_view program);

// The same as one line of JSON, field names as job files write theirs:
// {"program": ..., "version": ..., "gitCommit": ..., "buildType": ...,
//  "libtorchVersion": ...}.
std::string DescribeBuildAsJson(absl::string_view program);

}  // namespace chimera

#endif  // CHIMERA_COMMON_BUILD_INFO_H_
