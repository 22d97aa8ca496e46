#include "common/build_info.h"

#include "absl/strings/str_cat.h"

namespace chimera {

std::string DescribeBuild(absl::string_view program) {
  const BuildInfo& build = GetBuildInfo();
  return absl::StrCat(program, " ", build.version, " (commit ",
                      build.git_commit, ", ", build.build_type, ", LibTorch ",
                      build.torch_version, ")");
}

}  // namespace chimera
