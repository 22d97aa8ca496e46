// `chimera schedule` as a user runs it: every scheme in every output format,
// --out, the CSV round trip, a job's own schedule (-f), and one-line usage
// errors with exit code 2.
#include <cstdint>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/file_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::chimera::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr int kExitUsage = 2;
// Far above the size of any timeline these tests write.
constexpr uint64_t kMaxOutputBytes = 16 << 20;

ProcessResult Schedule(std::vector<std::string> args) {
  args.insert(args.begin(), {CHIMERA_BINARY, "schedule"});
  return RunProcess(args, CHIMERA_SOURCE_DIR);
}

// The quick start's job on its cluster, as -f draws it.
const std::vector<std::string> kQuickStartJob = {
    "-f", "examples/chimera.yaml", "--cluster",
    "examples/clusters/local-cpu.yaml"};

// Parameters that make each scheme generate a non-trivial schedule.
std::vector<std::string> SchemeArgs(const std::string& scheme) {
  std::vector<std::string> args = {"--scheme", scheme, "--depth", "4",
                                   "--micro-batches", "8"};
  if (scheme == "interleaved" || scheme == "breadth-first") {
    args.insert(args.end(), {"--chunks", "2"});
  }
  if (scheme == "mixpipe") args.insert(args.end(), {"--mixpipe-k", "2"});
  if (scheme == "chimera") {
    args.insert(args.end(), {"--concat", "backward-halving"});
  }
  return args;
}

// A gtest-safe name for a scheme: "breadth-first" -> "breadth_first".
std::string TestName(std::string scheme) {
  if (scheme == "1f1b") return "OneFOneB";
  for (char& c : scheme) {
    if (c == '-') c = '_';
  }
  return scheme;
}

// Exit code 2, nothing on stdout, and exactly one stderr line that
// contains `names` (the flag and value, or the problem).
void ExpectOneLineUsageError(const ProcessResult& r, const std::string& names) {
  EXPECT_EQ(r.exit_code, kExitUsage) << r.err;
  EXPECT_THAT(r.err, StartsWith("chimera schedule: "));
  EXPECT_THAT(r.err, HasSubstr(names));
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

class CliScheduleOutputTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(CliScheduleOutputTest, ExitsZeroWithWellFormedOutput) {
  const auto& [scheme, output] = GetParam();
  std::vector<std::string> args = SchemeArgs(scheme);
  args.insert(args.end(), {"-o", output});
  ProcessResult r = Schedule(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  ASSERT_FALSE(r.out.empty());
  if (output == "text") {
    EXPECT_THAT(r.out, HasSubstr("makespan"));
    EXPECT_THAT(r.out, HasSubstr("P3"));
  } else if (output == "json") {
    nlohmann::json report = nlohmann::json::parse(r.out);
    EXPECT_EQ(report.at("scheme"), scheme);
    EXPECT_EQ(report.at("depth"), 4);
    EXPECT_GT(report.at("micro_batches").get<int>(), 0);
    EXPECT_GT(report.at("makespan").get<double>(), 0);
    const double ratio = report.at("bubble_ratio").get<double>();
    EXPECT_GE(ratio, 0);
    EXPECT_LT(ratio, 1);
    EXPECT_GT(report.at("critical_path").at("forwards").get<int>(), 0);
    EXPECT_GT(report.at("critical_path").at("backwards").get<int>(), 0);
    ASSERT_EQ(report.at("workers").size(), 4u);
    for (size_t i = 0; i < report["workers"].size(); ++i) {
      const nlohmann::json& w = report["workers"][i];
      EXPECT_EQ(w.at("rank").get<int>(), static_cast<int>(i));
      EXPECT_GT(w.at("busy").get<double>(), 0);
      EXPECT_GE(w.at("idle").get<double>(), 0);
      EXPECT_GE(w.at("bubble_ratio").get<double>(), 0);
      EXPECT_GT(w.at("peak_activations").get<int>(), 0);
      EXPECT_FALSE(w.at("instructions").empty());
    }
  } else if (output == "svg") {
    EXPECT_THAT(r.out, StartsWith("<svg"));
    // The legend: forward and backward boxes, named by what the scheme has.
    EXPECT_THAT(r.out, HasSubstr(">forward"));
    EXPECT_THAT(r.out, HasSubstr(">backward"));
    if (scheme == "chimera" || scheme == "chimera-zb") {
      EXPECT_THAT(r.out, HasSubstr("forward, up pipeline"));
    }
    if (scheme == "1f1b") {
      EXPECT_THAT(r.out, Not(HasSubstr("pipeline")));
    }
    EXPECT_THAT(r.out, HasSubstr("</svg>"));
  } else {
    EXPECT_THAT(r.out, StartsWith("# chimera-schedule "));
    EXPECT_THAT(r.out, HasSubstr("FORWARD"));
    EXPECT_THAT(r.out, HasSubstr("BACKWARD"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllSchemesAndOutputs, CliScheduleOutputTest,
    ::testing::Combine(::testing::Values("gpipe", "1f1b", "gems", "chimera",
                                         "mixpipe", "interleaved",
                                         "breadth-first", "zb-h1", "zb-h2",
                                         "zb-auto", "zbv", "dualpipev",
                                         "chimera-zb", "pipedream",
                                         "pipedream-2bw"),
                       ::testing::Values("text", "json", "svg", "csv")),
    [](const auto& info) {
      return TestName(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
    });

class CliScheduleCsvTest : public ::testing::TestWithParam<std::string> {};

// Writes the schedule of `args` with `-o FORMAT` to a file, reads it back
// with FROM_FLAG and expects the same makespan; returns the file's text.
std::string ExpectSameMakespanThrough(const std::vector<std::string>& args,
                                      const std::string& format,
                                      const std::string& from_flag) {
  TempDir dir;
  const std::string file = dir.path() + "/schedule.csv";
  std::vector<std::string> to_file = args;
  to_file.insert(to_file.end(), {"-o", format, "--out", file});
  ProcessResult written = Schedule(to_file);
  EXPECT_EQ(written.exit_code, 0) << written.err;

  std::vector<std::string> direct = args;
  direct.insert(direct.end(), {"-o", "json"});
  ProcessResult generated = Schedule(direct);
  ProcessResult loaded = Schedule({from_flag, file, "-o", "json"});
  EXPECT_EQ(generated.exit_code, 0) << generated.err;
  EXPECT_EQ(loaded.exit_code, 0) << loaded.err;
  if (generated.exit_code == 0 && loaded.exit_code == 0) {
    EXPECT_DOUBLE_EQ(
        nlohmann::json::parse(loaded.out).at("makespan").get<double>(),
        nlohmann::json::parse(generated.out).at("makespan").get<double>());
  }
  return ReadTextFile(file, kMaxOutputBytes).value_or("");
}

TEST_P(CliScheduleCsvTest, CsvRoundTripsWithTheSameMakespan) {
  ExpectSameMakespanThrough(SchemeArgs(GetParam()), "csv", "--from-csv");
}

INSTANTIATE_TEST_SUITE_P(AllSchemes, CliScheduleCsvTest,
                         ::testing::Values("gpipe", "1f1b", "gems", "chimera",
                                           "mixpipe", "interleaved",
                                           "breadth-first", "zb-h1", "zb-h2",
                                           "zb-auto", "zbv", "dualpipev",
                                           "chimera-zb", "pipedream",
                                           "pipedream-2bw"),
                         [](const auto& info) { return TestName(info.param); });

// torch.distributed.pipelining's CSV: written with -o torch-csv, read with
// --from-torch-csv, to the same step.
TEST(CliScheduleTest, TorchCsvRoundTripsWithTheSameMakespan) {
  const std::string csv = ExpectSameMakespanThrough(
      {"--scheme", "zbv", "--depth", "4", "--micro-batches", "8"}, "torch-csv",
      "--from-torch-csv");
  EXPECT_THAT(csv, StartsWith("0F0,0F1,"));
}

TEST(CliScheduleTest, MalformedTorchCsvIsAUsageErrorNamingRowAndColumn) {
  TempDir dir;
  const std::string csv = dir.WriteFile("bad.csv", "0F0,0B0\n1F0,1Q0\n");
  ExpectOneLineUsageError(Schedule({"--from-torch-csv", csv}),
                          "bad.csv: row 2, column 2: '1Q0' is not an action");
}

TEST(CliScheduleTest, ChimeraAsTorchCsvIsAUsageErrorSayingWhy) {
  ExpectOneLineUsageError(
      Schedule({"--scheme", "chimera", "--depth", "4", "--micro-batches", "4",
                "-o", "torch-csv"}),
      "replicas on two or more ranks");
}

TEST(CliScheduleTest, OutWritesTheFileAndNothingToStdout) {
  TempDir dir;
  const std::string svg = dir.path() + "/timeline.svg";
  ProcessResult r = Schedule({"--scheme", "chimera", "--depth", "4",
                              "--micro-batches", "4", "-o", "svg", "--out",
                              svg});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  absl::StatusOr<std::string> timeline = ReadTextFile(svg, kMaxOutputBytes);
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_THAT(*timeline, StartsWith("<svg"));
}

// The issue's own command: unit F, B and W costs give chimera-zb's step of
// 3N + D/2 - 1.
TEST(CliScheduleTest, SplitCostsTimeTheHalvesOfASplitSchedule) {
  ProcessResult r = Schedule({"--scheme", "chimera-zb", "--depth", "4",
                              "--micro-batches", "8", "--forward-cost", "1",
                              "--backward-input-cost", "1",
                              "--backward-weight-cost", "1", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out).at("makespan").get<double>(),
                   25);
}

TEST(CliScheduleTest, SplitCostsForAFusedScheduleAreAUsageErrorNamingTheFlag) {
  ProcessResult r = Schedule({"--scheme", "chimera", "--depth", "4",
                              "--micro-batches", "4", "--backward-input-cost",
                              "1"});
  ExpectOneLineUsageError(r, "--backward-input-cost");
  EXPECT_THAT(r.err, HasSubstr("zb-h1, zb-h2, zb-auto, zbv, dualpipev, chimera-zb"));
}

// The asynchronous schedules draw two steps and the drain, and say what a
// step takes once the pipeline is full: N (F + B), no bubble.
TEST(CliScheduleTest, AsynchronousSchedulesDrawTheirStepsAndTheSteadyStep) {
  ProcessResult r = Schedule({"--scheme", "pipedream-2bw", "--depth", "4",
                              "--micro-batches", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("asynchronous (double-buffered weights): 2 "
                               "steps and the drain"));
  EXPECT_THAT(r.out, HasSubstr("a step takes 12 time units, bubble 0.0%"));
  // (2 N + D - 1)(F + B): the first step fills the pipeline, the second
  // follows it without a flush.
  EXPECT_THAT(r.out, HasSubstr("makespan 33.000"));
  ProcessResult json = Schedule({"--scheme", "pipedream", "--depth", "4",
                                 "--micro-batches", "4", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json report = nlohmann::json::parse(json.out);
  EXPECT_EQ(report.at("updates"), "stashed");
  EXPECT_EQ(report.at("steps"), 2);
}

// A replicated stage's workers each run a slice of every micro-batch, at
// the slice's share of the micro-batch's cost.
TEST(CliScheduleTest, ReplicatedStagesRunSlicesAtTheirShareOfTheCost) {
  ProcessResult r = Schedule({"--scheme", "1f1b", "--depth", "2",
                              "--replication", "2:1", "--micro-batches", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("replication=2:1 (2 slices per micro-batch"));
  // Stage 1 runs 8 slices of F + B = 1.5, stage 0's workers 4 each.
  EXPECT_THAT(r.out, HasSubstr("     2     12.000"));
  EXPECT_THAT(r.out, HasSubstr("     0      6.000"));
  ProcessResult json =
      Schedule({"--scheme", "gpipe", "--depth", "3", "--replication", "1:2:1",
                "--micro-batches", "2", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json report = nlohmann::json::parse(json.out);
  EXPECT_EQ(report.at("replication"), nlohmann::json({1, 2, 1}));
  EXPECT_EQ(report.at("workers").size(), 4u);
  ExpectOneLineUsageError(Schedule({"--scheme", "1f1b", "--depth", "2",
                                    "--replication", "2:1", "-o", "torch-csv"}),
                          "slices of every micro-batch");
  ExpectOneLineUsageError(
      Schedule({"--scheme", "chimera", "--depth", "2", "--replication", "2:1"}),
      "--replication: only applies to schedule gpipe or 1f1b");
}

TEST(CliScheduleTest, AsynchronousScheduleAsTorchCsvIsAUsageErrorSayingWhy) {
  ExpectOneLineUsageError(
      Schedule({"--scheme", "pipedream", "--depth", "2", "--micro-batches",
                "2", "-o", "torch-csv"}),
      "without a flush");
}

TEST(CliScheduleTest, ShardedAsynchronousScheduleIsAUsageError) {
  ExpectOneLineUsageError(
      Schedule({"--scheme", "pipedream-2bw", "--depth", "2", "--width", "2",
                "--micro-batches", "2", "--sharding", "optimizer"}),
      "--sharding: optimizer: pipedream-2bw shards nothing");
}

TEST(CliScheduleTest, OddChimeraDepthIsAUsageErrorNamingDepth) {
  ExpectOneLineUsageError(Schedule({"--scheme", "chimera", "--depth", "3"}),
                          "--depth: 3 must be even");
}

TEST(CliScheduleTest, UnknownSchemeIsAUsageErrorListingTheSchemes) {
  ExpectOneLineUsageError(Schedule({"--scheme", "zigzag"}),
                          "--scheme: 'zigzag' is not a schedule; use one of");
}

TEST(CliScheduleTest, OddMixPipeKIsAUsageErrorNamingTheFlag) {
  ExpectOneLineUsageError(Schedule({"--scheme", "mixpipe", "--depth", "4",
                                    "--micro-batches", "4", "--mixpipe-k",
                                    "3"}),
                          "--mixpipe-k: 3 must be even");
}

TEST(CliScheduleTest, KnobOfAnotherSchemeIsAUsageErrorAsInAJobFile) {
  ExpectOneLineUsageError(Schedule({"--scheme", "chimera", "--depth", "4", "--policy", "pb"}),
                          "--policy: only applies to schedule 1f1b, not 'chimera'");
  ExpectOneLineUsageError(Schedule({"--scheme", "gpipe", "--chunks", "2"}),
                          "--chunks: only applies to schedule interleaved or breadth-first");
}

TEST(CliScheduleTest, MissingCsvIsAUsageErrorNamingTheFile) {
  TempDir dir;
  const std::string missing = dir.path() + "/missing.csv";
  ExpectOneLineUsageError(Schedule({"--from-csv", missing}),
                          "--from-csv: '" + missing + "'");
}

TEST(CliScheduleTest, CsvWithADroppedReceiveIsRejected) {
  ProcessResult csv = Schedule({"--scheme", "1f1b", "--depth", "2",
                                "--micro-batches", "2", "-o", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  std::istringstream lines(csv.out);
  std::string line, corrupted;
  bool dropped = false;
  while (std::getline(lines, line)) {
    if (!dropped && line.find(",RECV_ACT,") != std::string::npos) {
      dropped = true;
      continue;
    }
    corrupted += line + "\n";
  }
  ASSERT_TRUE(dropped);
  TempDir dir;
  const std::string path = dir.WriteFile("dropped_recv.csv", corrupted);
  ExpectOneLineUsageError(Schedule({"--from-csv", path}),
                          "more send(s) than receive(s)");
}

TEST(CliScheduleTest, AJobsOwnScheduleIsThePlanThatChimeraPlanRanksFirst) {
  std::vector<std::string> args = kQuickStartJob;
  args.insert(args.end(), {"-o", "json"});
  const ProcessResult drawn = Schedule(args);
  ASSERT_EQ(drawn.exit_code, 0) << drawn.err;
  const nlohmann::json report = nlohmann::json::parse(drawn.out);

  std::vector<std::string> plan_args = {CHIMERA_BINARY, "plan"};
  plan_args.insert(plan_args.end(), kQuickStartJob.begin(),
                   kQuickStartJob.end());
  plan_args.insert(plan_args.end(), {"--top", "1", "-o", "json"});
  const ProcessResult planned = RunProcess(plan_args, CHIMERA_SOURCE_DIR);
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const nlohmann::json best = nlohmann::json::parse(planned.out)["candidates"][0];

  EXPECT_EQ(report["scheme"], best["scheme"]);
  // The job fixes chimera at D = 4 on 4 workers: one rank per stage.
  EXPECT_EQ(report["workers"].size(), 4u);
  // The simulation drawn is the one the prediction comes from.
  EXPECT_NEAR(report["makespan"].get<double>(),
              best["predictedIterationSeconds"].get<double>(),
              1e-9 * best["predictedIterationSeconds"].get<double>());
}

TEST(CliScheduleTest, AJobsOwnScheduleIsTitledWithItsPlanAndPrediction) {
  std::vector<std::string> args = kQuickStartJob;
  args.insert(args.end(), {"-o", "svg"});
  const ProcessResult r = Schedule(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("<svg"));
  EXPECT_THAT(r.out, HasSubstr("gpt-chimera: chimera W=1 D=4 B="));
  EXPECT_THAT(r.out, HasSubstr("on local-cpu, predicted step "));
}

// A job's costs are predicted seconds; a hand schedule's are unit costs.
TEST(CliScheduleTest, TheTextTimelineSaysWhatItsColumnsMeasure) {
  const ProcessResult job = Schedule(kQuickStartJob);
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_THAT(job.out, HasSubstr(" s; F/B forward/backward of the down pipeline"));
  EXPECT_THAT(job.out, Not(HasSubstr("time units")));
  const ProcessResult hand = Schedule({"--scheme", "1f1b", "--depth", "4", "--micro-batches", "8"});
  ASSERT_EQ(hand.exit_code, 0) << hand.err;
  EXPECT_THAT(hand.out, HasSubstr("timeline: one column = 1 time units; "));
}

TEST(CliScheduleTest, FlagsThatDescribeAScheduleByHandAreRefusedWithAJob) {
  std::vector<std::string> args = kQuickStartJob;
  args.insert(args.end(), {"--scheme", "gpipe"});
  ExpectOneLineUsageError(Schedule(args),
                          "--scheme describes a schedule by hand");
  ExpectOneLineUsageError(Schedule({"-f", "examples/chimera.yaml"}),
                          "-f needs --cluster");
  ExpectOneLineUsageError(
      Schedule({"--cluster", "examples/clusters/local-cpu.yaml"}),
      "--cluster and --profile plan a job: name its file with -f");
}

}  // namespace
}  // namespace chimera
