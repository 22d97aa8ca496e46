// stage_efficiency as scripts/gpu-check runs it, on the CPU: one line per
// hidden size and micro-batch size with a time and a FLOP rate, and bad flags
// refused with exit 2 naming the flag.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/support/subprocess.h"

namespace chimera::worker {
namespace {

using chimera::testing::ProcessResult;
using chimera::testing::RunProcess;

constexpr int kBadFlags = 2;

// The number before `unit` in `line` ("... 3.2 ms, ...").
double NumberBefore(const std::string& line, const std::string& unit) {
  const std::vector<std::string> words = absl::StrSplit(line, ' ');
  for (size_t i = 1; i < words.size(); ++i) {
    if (absl::StartsWith(words[i], unit)) {
      double value = 0;
      if (absl::SimpleAtod(words[i - 1], &value)) return value;
    }
  }
  return -1;
}

TEST(StageEfficiencyTest, PrintsTimeAndFlopRateForEveryShape) {
  const ProcessResult result = RunProcess(
      {STAGE_EFFICIENCY_BINARY, "--device", "cpu", "--dtype", "float32",
       "--hidden", "32,64", "--seq", "16", "--micro-batches", "1,2", "--layers",
       "2", "--repetitions", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<std::string> lines =
      absl::StrSplit(result.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << result.out;
  EXPECT_TRUE(absl::StartsWith(
      lines[0], "hidden 32 seq 16 micro-batch 1 layers 2 float32:"))
      << lines[0];
  EXPECT_TRUE(absl::StartsWith(
      lines[3], "hidden 64 seq 16 micro-batch 2 layers 2 float32:"))
      << lines[3];
  for (const std::string& line : lines) {
    EXPECT_GT(NumberBefore(line, "ms"), 0) << line;
    EXPECT_GT(NumberBefore(line, "TFLOP/s"), 0) << line;
  }
}

TEST(StageEfficiencyTest, BadFlagsExitTwoNamingTheFlag) {
  const struct {
    std::vector<std::string> args;
    std::string named;
  } cases[] = {
      {{STAGE_EFFICIENCY_BINARY, "--dtype", "int8"}, "--dtype is 'int8'"},
      {{STAGE_EFFICIENCY_BINARY, "--device", "xpu9", "--dtype", "float32"},
       "--device is 'xpu9'"},
      {{STAGE_EFFICIENCY_BINARY, "--seq", "0"}, "--seq"},
  };
  for (const auto& c : cases) {
    const ProcessResult result = RunProcess(c.args);
    EXPECT_EQ(result.exit_code, kBadFlags) << c.named << ": " << result.err;
    EXPECT_TRUE(absl::StrContains(result.err, c.named)) << result.err;
  }
}

}  // namespace
}  // namespace chimera::worker
