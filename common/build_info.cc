#include "common/build_info.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace chimera {

std::string DescribeBuild(absl::string_view program) {
  const BuildInfo& build = GetBuildInfo();
  return absl::StrCat(program, " ", build.version, " (commit ",
                      build.git_commit, ", ", build.build_type, ", LibTorch ",
                      build.torch_version, ")");
}

std::string DescribeBuildAsJson(absl::string_view program) {
  const BuildInfo& build = GetBuildInfo();
  // Every value is plain ASCII from the build; CEscape covers quotes anyway.
  const auto field = [](absl::string_view name, absl::string_view value) {
    return absl::StrCat("\"", name, "\": \"", absl::CEscape(value), "\"");
  };
  return absl::StrCat("{", field("program", program), ", ", field("version", build.version),
                      ", ", field("gitCommit", build.git_commit), ", ",
                      field("buildType", build.build_type), ", ",
                      field("libtorchVersion", build.torch_version), "}");
}

}  // namespace chimera
