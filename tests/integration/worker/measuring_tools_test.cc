// The measuring tools as scripts/gpu-check runs them, on the CPU:
// - stage_efficiency: one line per hidden size and micro-batch size with a
//   time and a FLOP rate;
// - head_loss_benchmark: a table row per head and path whose chunked loss is
//   the whole one's, in less memory;
// and bad flags refused with exit 2 naming the flag.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
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

// A row of head_loss_benchmark's table, by its cells.
struct HeadRow {
  std::string head, path;
  double peak_mib = 0, milliseconds = 0, loss = 0;
};

// "| head | hidden | samples × tokens | vocab | path | peak MiB | ms | loss |"
std::vector<HeadRow> HeadRows(const std::string& table) {
  std::vector<HeadRow> rows;
  for (absl::string_view line :
       absl::StrSplit(table, '\n', absl::SkipEmpty())) {
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() != 10) continue;
    for (std::string& cell : cells) absl::StripAsciiWhitespace(&cell);
    HeadRow row{cells[1], cells[5]};
    if (absl::SimpleAtod(cells[6], &row.peak_mib) &&
        absl::SimpleAtod(cells[7], &row.milliseconds) &&
        absl::SimpleAtod(cells[8], &row.loss)) {
      rows.push_back(row);  // not the header or its rule
    }
  }
  return rows;
}

TEST(HeadLossBenchmarkTest, TheChunkedLossIsTheWholeOneInLessMemory) {
  const ProcessResult result = RunProcess(
      {HEAD_LOSS_BENCHMARK_BINARY, "--device", "cpu", "--dtype", "float32",
       "--hidden", "32", "--micro-batches", "1", "--repetitions", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::vector<HeadRow> rows = HeadRows(result.out);
  ASSERT_EQ(rows.size(), 4u) << result.out;  // GPT-2 and BERT, two paths each
  for (size_t i = 0; i < rows.size(); i += 2) {
    const HeadRow& whole = rows[i];
    const HeadRow& chunked = rows[i + 1];
    EXPECT_EQ(whole.path, "whole") << result.out;
    EXPECT_EQ(chunked.path, "chunked") << result.out;
    EXPECT_NEAR(chunked.loss, whole.loss, 1e-5 * whole.loss) << whole.head;
    EXPECT_GT(whole.milliseconds, 0) << whole.head;
    EXPECT_GT(chunked.milliseconds, 0) << chunked.head;
  }
  // 1,024 tokens of 50,257 logits are 196 MiB in float32, and the whole
  // path holds several such tensors; a chunk's are 32 MiB and the weight's
  // gradient 6 MiB.
  EXPECT_EQ(rows[0].head, "GPT-2");
  EXPECT_GT(rows[0].peak_mib, 300) << result.out;
  EXPECT_LT(rows[1].peak_mib, 150) << result.out;
}

TEST(HeadLossBenchmarkTest, BadFlagsExitTwoNamingTheFlag) {
  for (const auto& [flag, value, named] :
       {std::tuple{"--dtype", "int8", "--dtype is 'int8'"},
        std::tuple{"--device", "xpu9", "--device is 'xpu9'"},
        std::tuple{"--micro-batches", "0", "--micro-batches"}}) {
    const ProcessResult result =
        RunProcess({HEAD_LOSS_BENCHMARK_BINARY, flag, value});
    EXPECT_EQ(result.exit_code, kBadFlags) << named << ": " << result.err;
    EXPECT_TRUE(absl::StrContains(result.err, named)) << result.err;
  }
}

}  // namespace
}  // namespace chimera::worker
