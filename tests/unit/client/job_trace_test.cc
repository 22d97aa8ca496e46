#include "client/job_trace.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "schedule/generator.h"
#include "schedule/params_proto.h"
#include "schedule/simulator.h"

namespace chimera::client {
namespace {

using ::testing::HasSubstr;

// A trace of a Chimera D=4 N=4 plan whose ranks "ran" the simulation with
// forward 1 ms, backward 2 ms, rank r starting r * 0.1 ms late.
chimera::v1::JobTrace ChimeraTrace() {
  schedule::ScheduleParams params;
  params.scheme = schedule::Scheme::kChimera;
  params.depth = 4;
  params.micro_batches = 4;
  chimera::v1::JobTrace trace;
  trace.set_job_id("gpt-1234");
  trace.set_step(7);
  schedule::SetScheduleParams(params, 2, trace.mutable_plan());
  absl::StatusOr<schedule::Schedule> program =
      schedule::GenerateSchedule(params);
  EXPECT_TRUE(program.ok()) << program.status();
  schedule::CostModel costs;
  costs.forward = 1e-3;
  costs.backward = 2e-3;
  absl::StatusOr<schedule::SimulationResult> result =
      schedule::Simulate(*program, costs);
  EXPECT_TRUE(result.ok()) << result.status();
  for (int r = 0; r < 4; ++r) {
    chimera::v1::RankTimeline* rank = trace.add_ranks();
    rank->set_rank(r);
    rank->set_worker_id(absl::StrCat("w", r));
    const double late = r * 1e-4;
    rank->mutable_timeline()->set_start_time(1.7e9 + late);
    for (const schedule::InstructionTiming& t : result->workers[r].timings) {
      rank->mutable_timeline()->add_op_start_seconds(t.start - late);
      rank->mutable_timeline()->add_op_end_seconds(t.end - late);
    }
  }
  return trace;
}

TEST(JobTraceTest, FormatFollowsTheFileName) {
  EXPECT_EQ(TraceFormatOf("step.svg"), "svg");
  EXPECT_EQ(TraceFormatOf("STEP.SVG"), "svg");
  EXPECT_EQ(TraceFormatOf("trace.json"), "chrome");
  EXPECT_EQ(TraceFormatOf("trace"), "chrome");
}

TEST(JobTraceTest, ChromeTraceHasOneTrackPerRankWithEveryInstructionInOrder) {
  const chimera::v1::JobTrace trace = ChimeraTrace();
  absl::StatusOr<std::string> text = ChromeTrace(trace);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json document = nlohmann::json::parse(*text);
  std::map<int, std::string> names;
  std::map<int, std::vector<nlohmann::json>> ops;
  for (const nlohmann::json& event : document.at("traceEvents")) {
    if (event.at("ph") == "M" && event.at("name") == "thread_name") {
      names[event.at("tid")] = event.at("args").at("name");
    } else if (event.at("ph") == "X") {
      ops[event.at("tid")].push_back(event);
    }
  }
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[2], "rank 2 (worker w2)");
  ASSERT_EQ(ops.size(), 4u);
  double earliest = 1e18;
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(static_cast<int>(ops[r].size()),
              trace.ranks(r).timeline().op_start_seconds_size());
    for (size_t i = 1; i < ops[r].size(); ++i) {
      const double end = ops[r][i - 1].at("ts").get<double>() +
                         ops[r][i - 1].at("dur").get<double>();
      EXPECT_LE(end, ops[r][i].at("ts").get<double>() + 1e-6)
          << "rank " << r << " op " << i;
    }
    earliest = std::min(earliest, ops[r].front().at("ts").get<double>());
  }
  // Unix seconds in a double resolve about a quarter of a microsecond.
  EXPECT_NEAR(earliest, 0, 0.5);
  // Rank 0's first op: the forward of micro-batch 0 on stage 0, 1 ms long.
  const nlohmann::json& first = ops[0].front();
  EXPECT_EQ(first.at("name"), "FORWARD 0");
  EXPECT_EQ(first.at("args").at("op"), "FORWARD");
  EXPECT_EQ(first.at("args").at("stage"), 0);
  EXPECT_EQ(first.at("args").at("micro_batches"), nlohmann::json::array({0}));
  EXPECT_NEAR(first.at("dur").get<double>(), 1000, 1e-3);
  EXPECT_EQ(document.at("otherData").at("step"), 7);
}

TEST(JobTraceTest, SvgDrawsTheMeasuredTimelineAboveTheSimulatedOne) {
  absl::StatusOr<std::string> svg = TraceSvg(ChimeraTrace());
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_THAT(*svg, ::testing::StartsWith("<svg"));
  const size_t measured = svg->find(">measured on the workers (");
  const size_t simulated = svg->find(">simulated: the same programs");
  ASSERT_NE(measured, std::string::npos);
  ASSERT_NE(simulated, std::string::npos);
  EXPECT_LT(measured, simulated);
  EXPECT_THAT(*svg, HasSubstr("job gpt-1234 step 7: chimera"));
  // The "measurement" is the simulation: it is as long as its replay.
  EXPECT_THAT(*svg, HasSubstr("(1.00x the simulated makespan)"));
}

TEST(JobTraceTest, TimelineThatDoesNotFitItsProgramIsRefusedByRank) {
  chimera::v1::JobTrace trace = ChimeraTrace();
  trace.mutable_ranks(3)
      ->mutable_timeline()
      ->mutable_op_end_seconds()
      ->RemoveLast();
  absl::StatusOr<std::string> text = ChromeTrace(trace);
  EXPECT_TRUE(absl::IsInvalidArgument(text.status()));
  EXPECT_THAT(text.status().message(), HasSubstr("rank 3"));
  trace = ChimeraTrace();
  trace.mutable_ranks()->RemoveLast();
  EXPECT_THAT(TraceSvg(trace).status().message(),
              HasSubstr("3 ranks; its plan has 4"));
}

TEST(JobTraceTest, UnwritablePathIsNamedBeforeAnyWait) {
  EXPECT_TRUE(CheckTracePath("trace.json").ok());
  const absl::Status missing = CheckTracePath("/nonexistent-dir/trace.json");
  EXPECT_TRUE(absl::IsInvalidArgument(missing));
  EXPECT_THAT(missing.message(),
              HasSubstr("'/nonexistent-dir' does not exist"));
}

}  // namespace
}  // namespace chimera::client
