// PipeDream and PipeDream-2BW as repeating steps: no flush between steps,
// updates where each rule puts them, and the timing the papers state.
#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "schedule/csv_io.h"
#include "schedule/step_unrolling.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using testing::MustGenerate;
using testing::MustSimulate;
using testing::Params;

constexpr double kForward = 1.0;
constexpr double kBackward = 2.0;

CostModel Costs() {
  CostModel costs;
  costs.forward = kForward;
  costs.backward = kBackward;
  return costs;
}

// The micro-batches each OPTIMIZER_STEP of `program` names, in order, and
// whether each one directly follows its micro-batch's backward (and the
// gradient that backward sends).
std::vector<int> UpdatesFollowingTheirBackward(
    const std::vector<Instruction>& program) {
  std::vector<int> updates;
  for (size_t i = 0; i < program.size(); ++i) {
    if (program[i].op != OpKind::kOptimizerStep) continue;
    size_t backward = i - 1;
    if (program[backward].op == OpKind::kSendGrad) --backward;
    EXPECT_EQ(program[backward].op, OpKind::kBackward) << "update " << i;
    EXPECT_EQ(program[backward].micro_batches, program[i].micro_batches);
    updates.push_back(program[i].micro_batches[0]);
  }
  return updates;
}

TEST(AsynchronousTest, PipeDreamUpdatesAfterEveryBackward) {
  const Schedule s = MustGenerate(Params(Scheme::kPipeDream, 4, 6));
  EXPECT_EQ(s.topology.update_rule, UpdateRule::kStashed);
  EXPECT_TRUE(s.topology.repeating);
  for (const WorkerProgram& worker : s.workers) {
    // Stage i's step runs the backwards D - i micro-batches behind its
    // forwards: the previous step's last D - i, then this step's first.
    const int behind = 4 - worker.rank;
    std::vector<int> want;
    for (int j = 0; j < 6; ++j) want.push_back(j - behind);
    EXPECT_EQ(UpdatesFollowingTheirBackward(worker.instructions), want)
        << "rank " << worker.rank;
  }
}

TEST(AsynchronousTest, TwoBwUpdatesOnceAStepAfterTheStepsLastBackward) {
  const Schedule s = MustGenerate(Params(Scheme::kPipeDream2Bw, 4, 4));
  EXPECT_EQ(s.topology.update_rule, UpdateRule::kDoubleBuffered);
  for (const WorkerProgram& worker : s.workers) {
    // Every stage finishes a step's backwards in the next step.
    EXPECT_EQ(UpdatesFollowingTheirBackward(worker.instructions),
              std::vector<int>{-1})
        << "rank " << worker.rank;
  }
}

// K steps take (K N + D - 1)(F + B): the first step pays 1F1B's fill and
// drain, (D - 1)(F + B), and every later one only N (F + B), no bubble.
TEST(AsynchronousTest, StepsOverlapSoOnlyTheFirstPaysTheFill) {
  for (Scheme scheme : {Scheme::kPipeDream, Scheme::kPipeDream2Bw}) {
    for (int d : {2, 4, 8}) {
      for (int n : {d, 2 * d + 1}) {
        const Schedule s = MustGenerate(Params(scheme, d, n));
        for (int steps : {1, 2, 3}) {
          absl::StatusOr<Schedule> run = UnrollSteps(s, steps);
          ASSERT_TRUE(run.ok()) << run.status();
          EXPECT_DOUBLE_EQ(MustSimulate(*run, kForward, kBackward).makespan,
                           (steps * n + d - 1) * (kForward + kBackward))
              << SchemeName(scheme) << " D=" << d << " N=" << n;
        }
        absl::StatusOr<SteadyStep> steady = SimulateSteadyStep(s, Costs());
        ASSERT_TRUE(steady.ok()) << steady.status();
        EXPECT_DOUBLE_EQ(steady->seconds, n * (kForward + kBackward));
        EXPECT_NEAR(steady->bubble_ratio, 0.0, 1e-12);
      }
    }
  }
}

// One step of a repeating schedule: a full pipeline's time and bubbles; of
// any other, its simulation as it is.
TEST(AsynchronousTest, AStepIsTheSteadyOneForARepeatingSchedule) {
  absl::StatusOr<SimulationResult> step =
      SimulateStep(MustGenerate(Params(Scheme::kPipeDream2Bw, 4, 4)), Costs());
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_DOUBLE_EQ(step->makespan, 4 * (kForward + kBackward));
  EXPECT_NEAR(step->bubble_ratio, 0.0, 1e-12);
  for (const WorkerResult& worker : step->workers) {
    EXPECT_NEAR(worker.bubble_ratio, 0.0, 1e-12);
  }
  const Schedule flushing = MustGenerate(Params(Scheme::kOneFOneB, 4, 4));
  step = SimulateStep(flushing, Costs());
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_DOUBLE_EQ(step->makespan,
                   MustSimulate(flushing, kForward, kBackward).makespan);
}

TEST(AsynchronousTest, UnrollingNumbersMicroBatchesAcrossStepsAndDrains) {
  const Schedule s = MustGenerate(Params(Scheme::kPipeDream2Bw, 2, 2));
  absl::StatusOr<Schedule> run = UnrollSteps(s, 2);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->topology.micro_batches, 4);
  EXPECT_EQ(run->topology.steps, 2);
  EXPECT_FALSE(run->topology.repeating);
  // Stage 0: forwards 0 and 1, backward 0 and 1 of each step after its
  // forwards, the update after each step's last backward.
  std::vector<std::pair<OpKind, int>> compute;
  for (const Instruction& inst : run->workers[0].instructions) {
    if (IsCompute(inst.op) || inst.op == OpKind::kOptimizerStep) {
      compute.push_back({inst.op, inst.micro_batches[0]});
    }
  }
  const std::vector<std::pair<OpKind, int>> want = {
      {OpKind::kForward, 0},  {OpKind::kForward, 1},
      {OpKind::kBackward, 0}, {OpKind::kForward, 2},
      {OpKind::kBackward, 1}, {OpKind::kOptimizerStep, 1},
      {OpKind::kForward, 3},  {OpKind::kBackward, 2},
      {OpKind::kBackward, 3}, {OpKind::kOptimizerStep, 3}};
  EXPECT_EQ(compute, want);
}

TEST(AsynchronousTest, SimulatingTheRepeatingStepItselfIsRefused) {
  const Schedule s = MustGenerate(Params(Scheme::kPipeDream, 2, 2));
  absl::StatusOr<SimulationResult> result = Simulate(s, Costs());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UnrollSteps(s, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Schedule> twice = UnrollSteps(s, 2);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(UnrollSteps(*twice, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AsynchronousTest, ParametersNeedADepthOfMicroBatchesAndNoSharding) {
  ScheduleParams p = Params(Scheme::kPipeDream2Bw, 4, 3);
  p.width = 2;
  p.sharding = Sharding::kOptimizer;
  const std::string errors =
      DescribeScheduleParamErrors(ValidateScheduleParams(p));
  EXPECT_NE(errors.find("micro-batches: 3 must be at least the depth 4"),
            std::string::npos)
      << errors;
  EXPECT_NE(errors.find("sharding: optimizer: pipedream-2bw shards nothing"),
            std::string::npos)
      << errors;
}

// With W > 1 every update applies the stage's gradients summed over its W
// replicas: an allreduce naming the update's micro-batch, between its
// backward and the update.
TEST(AsynchronousTest, WiderPipelinesAllreduceBeforeEveryUpdate) {
  for (Scheme scheme : {Scheme::kPipeDream, Scheme::kPipeDream2Bw}) {
    ScheduleParams p = Params(scheme, 3, 4);
    p.width = 2;
    const Schedule s = MustGenerate(p);
    ASSERT_EQ(s.workers.size(), 6u);
    for (const WorkerProgram& worker : s.workers) {
      const std::vector<Instruction>& program = worker.instructions;
      int updates = 0;
      for (size_t i = 0; i < program.size(); ++i) {
        if (program[i].op != OpKind::kOptimizerStep) continue;
        ++updates;
        ASSERT_GE(i, 2u);
        EXPECT_EQ(program[i - 2].op, OpKind::kAllreduceBegin);
        EXPECT_EQ(program[i - 1].op, OpKind::kAllreduceEnd);
        EXPECT_EQ(program[i - 2].micro_batches, program[i].micro_batches);
        EXPECT_EQ(program[i - 1].micro_batches, program[i].micro_batches);
      }
      EXPECT_EQ(updates, scheme == Scheme::kPipeDream ? 4 : 1)
          << SchemeName(scheme) << " rank " << worker.rank;
    }
  }
}

// Once the pipeline is full every update waits for its allreduce: a
// PipeDream step pays N of them, a 2BW step one.
TEST(AsynchronousTest, ASteadyStepPaysAnAllreducePerUpdate) {
  constexpr double kAllreduce = 0.5;
  CostModel costs = Costs();
  costs.stage_allreduce = {kAllreduce, kAllreduce};
  for (Scheme scheme : {Scheme::kPipeDream, Scheme::kPipeDream2Bw}) {
    ScheduleParams p = Params(scheme, 2, 4);
    p.width = 2;
    absl::StatusOr<SteadyStep> steady =
        SimulateSteadyStep(MustGenerate(p), costs);
    ASSERT_TRUE(steady.ok()) << steady.status();
    const int updates = scheme == Scheme::kPipeDream ? 4 : 1;
    EXPECT_DOUBLE_EQ(steady->seconds,
                     4 * (kForward + kBackward) + updates * kAllreduce)
        << SchemeName(scheme);
  }
}

// An allreduce that lets a weight gradient into the bucket it is summing,
// or that names no update, is refused.
TEST(AsynchronousTest, AnAsynchronousAllreduceOutOfPlaceIsRejected) {
  ScheduleParams p = Params(Scheme::kPipeDream, 2, 2);
  p.width = 2;
  {
    Schedule s = MustGenerate(p);
    std::vector<Instruction>& program = s.workers[1].instructions;
    // Rank 1 (stage 1): BACKWARD -1, SEND_GRAD, ALLREDUCE_BEGIN -1,
    // ALLREDUCE_END -1, OPTIMIZER_STEP -1, RECV_ACT 0, FORWARD 0,
    // BACKWARD 0, ...: move the first allreduce's end and its update past
    // BACKWARD 0.
    auto end = std::find_if(program.begin(), program.end(),
                            [](const Instruction& inst) {
                              return inst.op == OpKind::kAllreduceEnd;
                            });
    ASSERT_NE(end, program.end());
    ASSERT_EQ((end + 1)->op, OpKind::kOptimizerStep);
    const std::vector<Instruction> moved(end, end + 2);
    program.erase(end, end + 2);
    auto backward = std::find_if(
        program.begin(), program.end(), [](const Instruction& inst) {
          return inst.op == OpKind::kBackward && inst.micro_batches[0] == 0;
        });
    ASSERT_NE(backward, program.end());
    program.insert(backward + 1, moved.begin(), moved.end());
    const absl::Status status = ValidateSchedule(s);
    EXPECT_NE(status.message().find("while the stage's gradients are being "
                                    "summed"),
              std::string::npos)
        << status;
  }
  {
    Schedule s = MustGenerate(p);
    for (Instruction& inst : s.workers[0].instructions) {
      if (inst.op == OpKind::kAllreduceBegin) inst.micro_batches.clear();
    }
    const absl::Status status = ValidateSchedule(s);
    EXPECT_NE(status.message().find("naming it (as does its allreduce)"),
              std::string::npos)
        << status;
  }
}

// Moves rank `rank`'s update after the next forward: it then applies a
// weight gradient of the step it does not complete.
TEST(AsynchronousTest, AnUpdateOutOfPlaceIsRejected) {
  Schedule s = MustGenerate(Params(Scheme::kPipeDream, 2, 2));
  std::vector<Instruction>& program = s.workers[1].instructions;
  auto update =
      std::find_if(program.begin(), program.end(), [](const Instruction& inst) {
        return inst.op == OpKind::kOptimizerStep;
      });
  ASSERT_NE(update, program.end());
  const Instruction moved = *update;
  program.erase(update);
  program.push_back(moved);
  absl::Status status = ValidateSchedule(s);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("it applies"), std::string::npos) << status;
}

TEST(AsynchronousTest, AMissingOrDoubledUpdateIsRejected) {
  for (bool doubled : {false, true}) {
    Schedule s = MustGenerate(Params(Scheme::kPipeDream2Bw, 2, 2));
    std::vector<Instruction>& program = s.workers[0].instructions;
    auto update = std::find_if(program.begin(), program.end(),
                               [](const Instruction& inst) {
                                 return inst.op == OpKind::kOptimizerStep;
                               });
    ASSERT_NE(update, program.end());
    if (doubled) {
      program.insert(update, *update);
    } else {
      program.erase(update);
    }
    absl::Status status = ValidateSchedule(s);
    EXPECT_NE(
        status.message().find(doubled ? "updates 2 times" : "updates 0 times"),
        std::string::npos)
        << status;
  }
}

TEST(AsynchronousTest, CsvKeepsTheUpdateRuleAndTheRepeatingStep) {
  const Schedule s = MustGenerate(Params(Scheme::kPipeDream2Bw, 3, 4));
  const std::string csv = WriteScheduleCsv(s);
  EXPECT_NE(csv.find("updates=double-buffered"), std::string::npos) << csv;
  absl::StatusOr<Schedule> back = ReadScheduleCsv(csv);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->topology.update_rule, UpdateRule::kDoubleBuffered);
  EXPECT_TRUE(back->topology.repeating);
  EXPECT_TRUE(ValidateSchedule(*back).ok());
  for (size_t r = 0; r < s.workers.size(); ++r) {
    EXPECT_EQ(back->workers[r].instructions, s.workers[r].instructions);
  }
}

}  // namespace
}  // namespace chimera::schedule
