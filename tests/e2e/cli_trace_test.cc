// `chimera trace` and `chimera run --trace` as a user runs them: a 4-rank
// Chimera job on real worker daemons, its measured step as a Chrome trace
// and as an SVG beside the simulation, and the errors for jobs that cannot
// be traced; and `chimera logs --tail` on a job of those daemons.
#include <signal.h>

#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "chimera/v1/service.pb.h"
#include "common/file_reader.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "schedule/generator.h"
#include "schedule/params_proto.h"
#include "tests/support/coordinator_process.h"
#include "tests/support/example_job.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/worker_process.h"

namespace chimera {
namespace {

using ::chimera::testing::CoordinatorProcess;
using ::chimera::testing::ExampleChimeraJob;
using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kMaxFileBytes = 16 << 20;
constexpr int kRanks = 4;

// Instructions of each rank's program for `plan`, as the engine generates them.
std::vector<size_t> InstructionCounts(const chimera::v1::Plan& plan) {
  absl::StatusOr<schedule::ScheduleParams> params =
      schedule::ScheduleParamsOf(plan);
  EXPECT_TRUE(params.ok()) << params.status();
  if (!params.ok()) return {};
  absl::StatusOr<schedule::Schedule> program =
      schedule::GenerateSchedule(*params);
  EXPECT_TRUE(program.ok()) << program.status();
  std::vector<size_t> counts;
  if (program.ok()) {
    for (const auto& worker : program->workers)
      counts.push_back(worker.instructions.size());
  }
  return counts;
}

// A Chrome trace of `ranks` ranks: one track each, named, with as many ops as
// the rank's program has instructions, none overlapping the next.
void ExpectChromeTrace(const std::string& text,
                       const std::vector<size_t>& instructions) {
  const nlohmann::json document = nlohmann::json::parse(text);
  std::map<int, std::string> tracks;
  std::map<int, std::vector<std::pair<double, double>>> ops;
  for (const nlohmann::json& event : document.at("traceEvents")) {
    if (event.at("ph") == "M" && event.at("name") == "thread_name") {
      tracks[event.at("tid")] = event.at("args").at("name");
    } else if (event.at("ph") == "X") {
      ops[event.at("tid")].push_back({event.at("ts"), event.at("dur")});
      EXPECT_GE(event.at("dur").get<double>(), 0);
      EXPECT_TRUE(event.at("args").contains("stage"));
      EXPECT_TRUE(event.at("args").contains("micro_batches"));
    }
  }
  ASSERT_EQ(tracks.size(), instructions.size());
  ASSERT_EQ(ops.size(), instructions.size());
  for (size_t rank = 0; rank < instructions.size(); ++rank) {
    EXPECT_THAT(tracks[rank],
                StartsWith(absl::StrCat("rank ", rank, " (worker ")));
    const auto& spans = ops[rank];
    EXPECT_EQ(spans.size(), instructions[rank]) << "rank " << rank;
    for (size_t i = 1; i < spans.size(); ++i) {
      EXPECT_LE(spans[i - 1].first + spans[i - 1].second, spans[i].first + 1e-3)
          << "rank " << rank << " ops " << i - 1 << " and " << i << " overlap";
    }
  }
}

void ExpectTraceSvg(const std::string& svg) {
  EXPECT_THAT(svg, StartsWith("<svg"));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
  const size_t measured = svg.find(">measured on the workers");
  const size_t simulated = svg.find(">simulated: ");
  EXPECT_NE(measured, std::string::npos) << "no measured timeline";
  EXPECT_NE(simulated, std::string::npos) << "no simulated timeline";
  EXPECT_LT(measured, simulated) << "the measured timeline is drawn first";
  EXPECT_THAT(svg, HasSubstr("time (seconds)"));
}

class CliTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<CoordinatorProcess> coordinator = CoordinatorProcess::Start(
        CHIMERA_COORDINATOR_BINARY, {"--db", ":memory:", "--max-workers", "4"});
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    // In the source tree, where the job file's data path points.
    for (int i = 0; i < kRanks; ++i) {
      const std::string id = absl::StrCat("w", i);
      workers_.push_back(testing::StartWorkerDaemon(
          {.binary = CHIMERA_WORKER_BINARY,
           .coordinator = coordinator_->address(),
           .worker_id = id,
           .work_dir = File(id),
           .working_dir = CHIMERA_SOURCE_DIR,
           .log_file = File(id + ".log")}));
    }
  }
  void TearDown() override {
    testing::StopProcesses(workers_, absl::Seconds(15));
    if (coordinator_) {
      EXPECT_EQ(coordinator_->Stop(), 0);
    }
  }

  std::string File(const std::string& name) { return dir_.path() + "/" + name; }

  ProcessResult Chimera(std::vector<std::string> args,
                        absl::Duration timeout = absl::Seconds(60)) {
    args.insert(args.begin(), CHIMERA_BINARY);
    args.insert(args.end(), {"--address", coordinator_->address()});
    return RunProcess(args, CHIMERA_SOURCE_DIR, timeout);
  }

  chimera::testing::TempDir dir_;
  std::optional<CoordinatorProcess> coordinator_;
  std::vector<std::unique_ptr<net::ChildProcess>> workers_;
};

TEST_F(CliTraceTest, FourRankChimeraStepAsChromeTraceAndSvg) {
  ProcessResult submit =
      Chimera({"submit", "-f", ExampleChimeraJob(dir_, 100000), "--no-wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id(absl::StripAsciiWhitespace(submit.out));

  // Waits through PENDING (workers registering) to the next step.
  ProcessResult chrome =
      Chimera({"trace", id, "--out", File("trace.json"), "--wait", "120"},
              absl::Minutes(3));
  ASSERT_EQ(chrome.exit_code, 0) << chrome.out << chrome.err;
  EXPECT_THAT(chrome.out,
              HasSubstr(absl::StrCat("trace of job ", id, " step ")));
  EXPECT_THAT(chrome.out, HasSubstr("(4 ranks)"));

  ProcessResult status = Chimera({"status", id, "-o", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  // The plan, read back into its message (the job's times are RFC 3339
  // strings, which the message's doubles would refuse).
  chimera::v1::Plan plan;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  nlohmann::json::parse(status.out).at("plan").dump(), &plan)
                  .ok())
      << status.out;
  EXPECT_EQ(plan.scheme(), "chimera");
  const std::vector<size_t> instructions = InstructionCounts(plan);
  ASSERT_EQ(instructions.size(), static_cast<size_t>(kRanks));
  absl::StatusOr<std::string> trace =
      ReadTextFile(File("trace.json"), kMaxFileBytes);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ExpectChromeTrace(*trace, instructions);

  ProcessResult svg =
      Chimera({"trace", id, "--out", File("trace.svg"), "-o", "json"},
              absl::Minutes(3));
  ASSERT_EQ(svg.exit_code, 0) << svg.out << svg.err;
  const nlohmann::json written = nlohmann::json::parse(svg.out);
  EXPECT_EQ(written.at("format"), "svg");
  EXPECT_EQ(written.at("ranks"), kRanks);
  absl::StatusOr<std::string> drawing =
      ReadTextFile(File("trace.svg"), kMaxFileBytes);
  ASSERT_TRUE(drawing.ok()) << drawing.status();
  ExpectTraceSvg(*drawing);

  // A step long past is not held.
  ProcessResult past =
      Chimera({"trace", id, "--step", "0", "--out", File("past.json")});
  EXPECT_EQ(past.exit_code, 2) << past.out << past.err;
  EXPECT_THAT(past.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(past.err, HasSubstr("already run step 0"));

  ASSERT_EQ(Chimera({"stop", id}).exit_code, 0);
  ProcessResult ended = Chimera({"trace", id, "--out", File("ended.json")});
  EXPECT_EQ(ended.exit_code, 1) << ended.out << ended.err;
  EXPECT_THAT(ended.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(ended.err, HasSubstr("has ended (STOPPED)"));
}

TEST_F(CliTraceTest, UnknownJobIsNotFoundAndABadPathIsRefusedBeforeWaiting) {
  ProcessResult unknown = Chimera({"trace", "nope", "--out", File("t.json")});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.err;
  EXPECT_THAT(unknown.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(unknown.err, HasSubstr("nope"));

  ProcessResult bad_dir =
      Chimera({"trace", "nope", "--out", File("missing/t.json")});
  EXPECT_EQ(bad_dir.exit_code, 2) << bad_dir.err;
  EXPECT_THAT(bad_dir.err, HasSubstr("--out"));
  EXPECT_THAT(bad_dir.err, HasSubstr("does not exist"));

  ProcessResult bad_format =
      Chimera({"trace", "nope", "--out", File("t.json"), "--format", "png"});
  EXPECT_EQ(bad_format.exit_code, 2) << bad_format.err;
}

TEST(CliRunTraceTest, RunWritesTheSvgOfTheStepItWasAskedFor) {
  chimera::testing::TempDir dir;
  const std::string svg = dir.path() + "/step.svg";
  ProcessResult run =
      RunProcess({CHIMERA_BINARY, "run", "-f", ExampleChimeraJob(dir, 6),
                  "--trace", svg, "--trace-step", "3"},
                 CHIMERA_SOURCE_DIR, absl::Minutes(3));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("wrote the trace of step 3 to " + svg));
  absl::StatusOr<std::string> drawing = ReadTextFile(svg, kMaxFileBytes);
  ASSERT_TRUE(drawing.ok()) << drawing.status();
  ExpectTraceSvg(*drawing);
  EXPECT_THAT(*drawing, HasSubstr(" step 3: chimera W=1 D=4"));
}

TEST(CliRunTraceTest, TraceStepBeyondTheJobIsBadInput) {
  chimera::testing::TempDir dir;
  ProcessResult run =
      RunProcess({CHIMERA_BINARY, "run", "-f", ExampleChimeraJob(dir, 6),
                  "--trace", dir.path() + "/t.json", "--trace-step", "6"},
                 CHIMERA_SOURCE_DIR);
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_THAT(
      run.err,
      HasSubstr(
          "--trace-step: 6 is not a step of the job (it runs steps 0 to 5)"));
}

// `chimera logs` on the same daemons: all of a finished job's steps, or
// with --tail only the last ones.
using CliLogsTest = CliTraceTest;

// "k/N" of each step line of `logs` output ("step k/N  loss ...").
std::vector<std::string> StepLines(const std::string& out) {
  std::vector<std::string> steps;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::ConsumePrefix(&line, "step ")) {
      steps.emplace_back(line.substr(0, line.find(' ')));
    }
  }
  return steps;
}

TEST_F(CliLogsTest, TailShowsOnlyTheLastStepsDone) {
  ProcessResult submit =
      Chimera({"submit", "-f", ExampleChimeraJob(dir_, 5)}, absl::Seconds(120));
  ASSERT_EQ(submit.exit_code, 0) << submit.err;

  ProcessResult all = Chimera({"logs", "gpt-chimera"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(StepLines(all.out),
            (std::vector<std::string>{"1/5", "2/5", "3/5", "4/5", "5/5"}));
  ProcessResult tail = Chimera({"logs", "gpt-chimera", "--tail", "2"});
  ASSERT_EQ(tail.exit_code, 0) << tail.err;
  EXPECT_EQ(StepLines(tail.out), (std::vector<std::string>{"4/5", "5/5"}));
  EXPECT_THAT(tail.out, HasSubstr("state SUCCEEDED"));
}

}  // namespace
}  // namespace chimera
