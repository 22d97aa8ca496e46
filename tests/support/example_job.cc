#include "tests/support/example_job.h"

#include "absl/strings/str_cat.h"
#include "common/file_reader.h"
#include "gtest/gtest.h"

namespace chimera::testing {
namespace {

// The most a job file may hold (jobspec::kMaxYamlFileBytes).
constexpr uint64_t kMaxJobBytes = 1 << 20;

}  // namespace

std::string ExampleChimeraJob(const TempDir& dir, int steps) {
  absl::StatusOr<std::string> yaml = ReadTextFile(
      std::string(CHIMERA_SOURCE_DIR) + "/examples/chimera.yaml", kMaxJobBytes);
  if (!yaml.ok()) {
    ADD_FAILURE() << yaml.status();
    return "";
  }
  const std::string from = "maxSteps: 50";
  yaml->replace(yaml->find(from), from.size(),
                absl::StrCat("maxSteps: ", steps));
  return dir.WriteFile("chimera.yaml", *yaml);
}

}  // namespace chimera::testing
