#include "schedule/measured_timeline.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/timeline.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using ::chimera::schedule::testing::MustGenerate;
using ::chimera::schedule::testing::MustSimulate;
using ::chimera::schedule::testing::Params;
using ::testing::HasSubstr;

// A simulation's timings as if measured, every rank shifted by `offset`.
std::vector<std::vector<InstructionTiming>> Spans(
    const SimulationResult& result, double offset) {
  std::vector<std::vector<InstructionTiming>> spans;
  for (const WorkerResult& worker : result.workers) {
    auto& rank = spans.emplace_back();
    for (const InstructionTiming& t : worker.timings) {
      rank.push_back({t.start + offset, t.end + offset});
    }
  }
  return spans;
}

TEST(MeasuredTimelineTest, MeasurementOfASimulationHasTheSimulatedFigures) {
  const Schedule s = MustGenerate(Params(Scheme::kChimera, 4, 4));
  const SimulationResult simulated = MustSimulate(s);
  absl::StatusOr<SimulationResult> measured =
      MeasuredResult(s, Spans(simulated, 1.7e9));
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_NEAR(measured->makespan, simulated.makespan, 1e-6);
  EXPECT_NEAR(measured->bubble_ratio, simulated.bubble_ratio, 1e-6);
  ASSERT_EQ(measured->workers.size(), simulated.workers.size());
  for (size_t r = 0; r < simulated.workers.size(); ++r) {
    EXPECT_NEAR(measured->workers[r].busy, simulated.workers[r].busy, 1e-6);
    EXPECT_EQ(measured->workers[r].peak_activations,
              simulated.workers[r].peak_activations);
    EXPECT_NEAR(measured->workers[r].timings.front().start,
                simulated.workers[r].timings.front().start, 1e-6);
  }
}

TEST(MeasuredTimelineTest, MeasuredCostsReplayTheMeasuredOpTimes) {
  const Schedule s = MustGenerate(Params(Scheme::kChimera, 4, 4));
  const SimulationResult simulated = MustSimulate(s, 0.25, 0.5);
  absl::StatusOr<SimulationResult> measured =
      MeasuredResult(s, Spans(simulated, 0));
  ASSERT_TRUE(measured.ok()) << measured.status();
  const CostModel costs = MeasuredCosts(s, *measured);
  ASSERT_EQ(costs.stage_forward.size(), 4u);
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_NEAR(costs.stage_forward[stage], 0.25, 1e-9);
    EXPECT_NEAR(costs.stage_backward[stage], 0.5, 1e-9);
  }
  absl::StatusOr<SimulationResult> replayed = Simulate(s, costs);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_NEAR(replayed->makespan, simulated.makespan, 1e-9);
}

TEST(MeasuredTimelineTest, SpansThatDoNotFitTheProgramsAreNamed) {
  const Schedule s = MustGenerate(Params(Scheme::kOneFOneB, 2, 2));
  auto spans = Spans(MustSimulate(s), 0);
  spans.pop_back();
  EXPECT_THAT(MeasuredResult(s, spans).status().message(),
              HasSubstr("1 ranks; the schedule has 2"));
  spans = Spans(MustSimulate(s), 0);
  spans[1].pop_back();
  EXPECT_THAT(MeasuredResult(s, spans).status().message(),
              HasSubstr("rank 1 measured"));
  spans = Spans(MustSimulate(s), 0);
  spans[0][2].end = spans[0][2].start - 1;
  EXPECT_THAT(MeasuredResult(s, spans).status().message(),
              HasSubstr("rank 0 instruction 2 ends"));
}

TEST(SvgTimelinesTest, DrawsEachLabelledTimelineOnOneScale) {
  const Schedule s = MustGenerate(Params(Scheme::kChimera, 4, 4));
  const SimulationResult fast = MustSimulate(s, 1, 2);
  const SimulationResult slow = MustSimulate(s, 2, 4);
  const std::string svg =
      SvgTimelines(s, {{"measured here", &slow}, {"simulated there", &fast}},
                   "both", "seconds");
  EXPECT_THAT(svg, HasSubstr(">both</text>"));
  EXPECT_THAT(svg, HasSubstr(">measured here</text>"));
  EXPECT_THAT(svg, HasSubstr(">simulated there</text>"));
  // Two axes, one legend.
  size_t axes = 0;
  for (size_t at = svg.find("time (seconds)"); at != std::string::npos;
       at = svg.find("time (seconds)", at + 1)) {
    ++axes;
  }
  EXPECT_EQ(axes, 2u);
  EXPECT_EQ(svg.find("forward, up pipeline"),
            svg.rfind("forward, up pipeline"));
  EXPECT_EQ(svg.rfind("</svg>"), svg.size() - 7);
}

}  // namespace
}  // namespace chimera::schedule
