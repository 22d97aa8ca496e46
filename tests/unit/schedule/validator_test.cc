// The validator accepts generated schedules and rejects corrupted ones with
// a message that says what is wrong (for deadlocks: the wait-for cycle).
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using ::testing::HasSubstr;
using testing::MustGenerate;
using testing::Params;

size_t FindOp(const WorkerProgram& w, OpKind op, size_t from = 0) {
  for (size_t i = from; i < w.instructions.size(); ++i) {
    if (w.instructions[i].op == op) return i;
  }
  return w.instructions.size();
}

TEST(ValidatorTest, DroppedReceiveIsRejectedNamingTheUnmatchedSend) {
  Schedule s = MustGenerate(Params(Scheme::kOneFOneB, 4, 4));
  auto& prog = s.workers[2].instructions;
  prog.erase(prog.begin() + FindOp(s.workers[2], OpKind::kRecvAct));
  absl::Status status = ValidateSchedule(s);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("unmatched p2p"));
  EXPECT_THAT(status.message(), HasSubstr("SEND_ACT"));
  EXPECT_THAT(status.message(), HasSubstr("from rank 1 to rank 2"));
}

TEST(ValidatorTest, SizesTheProgramsCannotCoverAreRefusedBeforeAnythingOfThatSize) {
  // As a schedule file may claim: millions of chunks or micro-batches for a
  // handful of instructions (the CSV fuzzer's find: validating such a
  // schedule walked every claimed stage replica for over 20 s).
  Schedule chunks = MustGenerate(Params(Scheme::kGpipe, 2, 2));
  chunks.topology.num_chunks = 6666661;
  absl::Status status = ValidateSchedule(chunks);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("13333322 stage replicas, but the programs hold only 2"));

  Schedule micro_batches = MustGenerate(Params(Scheme::kChimera, 4, 4));
  micro_batches.topology.micro_batches = 1 << 30;
  status = ValidateSchedule(micro_batches);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("but the programs run only 16"));
}

TEST(ValidatorTest, SwappedReceivesThatDeadlockAreRejectedWithTheCycle) {
  // Rank 0 first waits for a gradient that rank 1 can only send after the
  // activations rank 0 has not sent yet.
  Schedule s = MustGenerate(Params(Scheme::kGpipe, 2, 2));
  auto& prog = s.workers[0].instructions;
  size_t recv = FindOp(s.workers[0], OpKind::kRecvGrad);
  Instruction moved = prog[recv];
  prog.erase(prog.begin() + recv);
  prog.insert(prog.begin(), moved);
  absl::Status status = ValidateSchedule(s);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("deadlock"));
  EXPECT_THAT(status.message(), HasSubstr("rank 0 waits at #0 RECV_GRAD"));
  EXPECT_THAT(status.message(), HasSubstr("rank 1 waits"));
  EXPECT_THAT(status.message(), HasSubstr("cycle"));
}

TEST(ValidatorTest, ReceivesOutOfSendOrderAreRejectedForNccl) {
  // Rank 1 takes micro-batch 1's activation before micro-batch 0's. Tags
  // would match them, but NCCL pairs sends and receives by order alone.
  Schedule s = MustGenerate(Params(Scheme::kGpipe, 2, 2));
  auto& prog = s.workers[1].instructions;
  const size_t first = FindOp(s.workers[1], OpKind::kRecvAct);
  const size_t second = FindOp(s.workers[1], OpKind::kRecvAct, first + 1);
  ASSERT_LT(second, prog.size());
  Instruction moved = prog[second];
  prog.erase(prog.begin() + second);
  prog.insert(prog.begin() + first, moved);
  absl::Status status = ValidateSchedule(s);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("out of send order"));
  EXPECT_THAT(status.message(),
              HasSubstr("is receive #0 from rank 0, whose send #0 is "
                        "activation of chunk 0 stage 0 mb 0"));
}

TEST(ValidatorTest, ComputeBeforeItsInputIsADataDependencyError) {
  Schedule s = MustGenerate(Params(Scheme::kOneFOneB, 2, 1));
  auto& prog = s.workers[1].instructions;
  // RECV_ACT, FORWARD -> FORWARD, RECV_ACT.
  size_t recv = FindOp(s.workers[1], OpKind::kRecvAct);
  std::swap(prog[recv], prog[recv + 1]);
  absl::Status status = ValidateSchedule(s);
  EXPECT_THAT(status.message(), HasSubstr("data dependency"));
  EXPECT_THAT(status.message(), HasSubstr("no earlier RECV_ACT"));
}

TEST(ValidatorTest, DuplicatedForwardIsRejected) {
  Schedule s = MustGenerate(Params(Scheme::kGpipe, 2, 2));
  auto& prog = s.workers[0].instructions;
  prog.insert(prog.begin(), prog[FindOp(s.workers[0], OpKind::kForward)]);
  EXPECT_THAT(ValidateSchedule(s).message(), HasSubstr("runs forward 2 times"));
}

TEST(ValidatorTest, ForwardOnTheWrongWorkerIsRejected) {
  Schedule s = MustGenerate(Params(Scheme::kGpipe, 2, 2));
  s.workers[0].instructions[FindOp(s.workers[0], OpKind::kForward)].stage = 1;
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("the stage is held by rank 1"));
}

TEST(ValidatorTest, WrongPeerIsRejected) {
  ScheduleParams params = Params(Scheme::kOneFOneB, 4, 4);
  Schedule s = MustGenerate(params);
  s.workers[1].instructions[FindOp(s.workers[1], OpKind::kSendAct)].peer = 3;
  EXPECT_THAT(ValidateSchedule(s).message(), HasSubstr("peer must be rank 2"));
}

TEST(ValidatorTest, MissingAllreduceIsRejected) {
  ScheduleParams params = Params(Scheme::kOneFOneB, 2, 2);
  params.width = 2;
  Schedule s = MustGenerate(params);
  auto& prog = s.workers[3].instructions;
  prog.erase(prog.begin() + FindOp(s.workers[3], OpKind::kAllreduceBegin));
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("must begin and end the allreduce"));
}

TEST(ValidatorTest, MissingBackwardIsRejected) {
  Schedule s = MustGenerate(Params(Scheme::kChimera, 4, 4));
  for (auto& w : s.workers) {
    auto& prog = w.instructions;
    prog.erase(std::remove_if(prog.begin(), prog.end(),
                              [](const Instruction& i) {
                                return i.op == OpKind::kBackward &&
                                       i.chunk == 1 &&
                                       i.micro_batches[0] == 3 && i.stage == 0;
                              }),
               prog.end());
  }
  EXPECT_THAT(
      ValidateSchedule(s).message(),
      HasSubstr("micro-batch 3 of data-parallel replica 0 misses backward "
                "on chunk 1 stage 0"));
}

TEST(ValidatorTest, AllreduceSpansDataParallelReplicas) {
  ScheduleParams params = Params(Scheme::kOneFOneB, 2, 2);
  params.width = 3;
  Schedule s = MustGenerate(params);
  ASSERT_EQ(s.workers.size(), 6u);
  for (const WorkerProgram& w : s.workers) {
    EXPECT_LT(FindOp(w, OpKind::kAllreduceBegin), w.instructions.size());
    EXPECT_EQ(w.instructions.back().op, OpKind::kOptimizerStep);
  }
}

TEST(ValidatorTest, SinglePipelineWithoutDataParallelismHasNoAllreduce) {
  Schedule s = MustGenerate(Params(Scheme::kOneFOneB, 4, 4));
  for (const WorkerProgram& w : s.workers) {
    EXPECT_EQ(FindOp(w, OpKind::kAllreduceBegin), w.instructions.size());
  }
}

// Each BACKWARD becomes a BACKWARD_INPUT followed at once by its
// BACKWARD_WEIGHT: the plainest split schedule.
Schedule SplitEveryBackward(Schedule s) {
  for (WorkerProgram& w : s.workers) {
    std::vector<Instruction> split;
    for (const Instruction& inst : w.instructions) {
      if (inst.op != OpKind::kBackward) {
        split.push_back(inst);
        continue;
      }
      Instruction input = inst;
      input.op = OpKind::kBackwardInput;
      Instruction weight = inst;
      weight.op = OpKind::kBackwardWeight;
      weight.recompute = false;
      split.push_back(input);
      split.push_back(weight);
    }
    w.instructions = std::move(split);
  }
  return s;
}

// Where the weight half of (chunk, stage, micro-batch) sits in `w`.
size_t FindWeightHalf(const WorkerProgram& w, int stage, int mb) {
  for (size_t i = 0; i < w.instructions.size(); ++i) {
    const Instruction& inst = w.instructions[i];
    if (inst.op == OpKind::kBackwardWeight && inst.stage == stage &&
        inst.micro_batches[0] == mb) {
      return i;
    }
  }
  return w.instructions.size();
}

TEST(ValidatorTest, EveryBackwardSplitInItsTwoHalvesIsValid) {
  ScheduleParams params = Params(Scheme::kOneFOneB, 4, 4);
  params.width = 2;
  params.recompute = true;
  EXPECT_TRUE(ValidateSchedule(SplitEveryBackward(MustGenerate(params))).ok());
  params.scheme = Scheme::kChimera;
  params.concat = Concat::kBackwardHalving;
  params.micro_batches = 8;
  params.recompute = false;
  EXPECT_TRUE(ValidateSchedule(SplitEveryBackward(MustGenerate(params))).ok());
}

TEST(ValidatorTest, AWeightHalfBeforeItsInputHalfIsADataDependencyError) {
  Schedule s = SplitEveryBackward(MustGenerate(Params(Scheme::kOneFOneB, 2, 2)));
  auto& prog = s.workers[1].instructions;
  const size_t weight = FindWeightHalf(s.workers[1], 1, 0);
  ASSERT_LT(weight, prog.size());
  std::swap(prog[weight - 1], prog[weight]);
  const absl::Status status = ValidateSchedule(s);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("BACKWARD_WEIGHT chunk=0 stage=1 mb=0 runs before the "
                        "BACKWARD_INPUT of its micro-batch"));
}

TEST(ValidatorTest, AMissingHalfIsNamed) {
  Schedule s = SplitEveryBackward(MustGenerate(Params(Scheme::kOneFOneB, 2, 2)));
  auto& prog = s.workers[0].instructions;
  prog.erase(prog.begin() + FindWeightHalf(s.workers[0], 0, 1));
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("micro-batch 1 of data-parallel replica 0 misses the "
                        "weight half (BACKWARD_WEIGHT) of its backward on "
                        "chunk 0 stage 0 (rank 0)"));
}

TEST(ValidatorTest, AHalfComputedTwiceIsNamedWithItsRankAndIndex) {
  Schedule s = SplitEveryBackward(MustGenerate(Params(Scheme::kOneFOneB, 2, 2)));
  auto& prog = s.workers[1].instructions;
  const size_t weight = FindWeightHalf(s.workers[1], 1, 1);
  ASSERT_LT(weight, prog.size());
  // A fused BACKWARD after the split one computes both halves again.
  Instruction fused = prog[weight];
  fused.op = OpKind::kBackward;
  prog.insert(prog.begin() + weight + 1, fused);
  const std::string message(ValidateSchedule(s).message());
  EXPECT_THAT(message, HasSubstr(absl::StrCat(
                           "rank 1 #", weight + 1,
                           " BACKWARD chunk=0 stage=1 mb=1: computes the "
                           "input half (BACKWARD_INPUT) a second time")));
  EXPECT_THAT(message, HasSubstr("computes the weight half (BACKWARD_WEIGHT) a "
                                 "second time"));
}

TEST(ValidatorTest, OnlyTheInputHalfRecomputes) {
  Schedule s = SplitEveryBackward(MustGenerate(Params(Scheme::kOneFOneB, 2, 2)));
  auto& prog = s.workers[0].instructions;
  prog[FindWeightHalf(s.workers[0], 0, 0)].recompute = true;
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("only BACKWARD and BACKWARD_INPUT recompute"));
}

TEST(ValidatorTest, AnAllreduceBeforeTheLastWeightHalfIsADataDependencyError) {
  ScheduleParams params = Params(Scheme::kOneFOneB, 2, 2);
  params.width = 2;
  Schedule s = SplitEveryBackward(MustGenerate(params));
  auto& prog = s.workers[2].instructions;
  const size_t weight = FindWeightHalf(s.workers[2], 0, 1);
  const size_t begin = FindOp(s.workers[2], OpKind::kAllreduceBegin);
  ASSERT_LT(weight, begin);
  const Instruction moved = prog[weight];
  prog.erase(prog.begin() + weight);
  prog.insert(prog.begin() + begin, moved);  // just after the BEGIN
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("begins the allreduce after 1 of the 2 weight "
                        "gradients (BACKWARD or BACKWARD_WEIGHT) it sums"));
}

// 1F1B, D = 2, N = 2, W = 2 sharded as `sharding`: stage 0's group is
// ranks 0 and 2, stage 1's ranks 1 and 3.
Schedule ShardedOneFOneB(Sharding sharding) {
  ScheduleParams params = Params(Scheme::kOneFOneB, 2, 2);
  params.width = 2;
  params.sharding = sharding;
  return MustGenerate(params);
}

// Moves the instruction at `from` of `w` to just before the one at `to`.
void MoveBefore(WorkerProgram& w, size_t from, size_t to) {
  const Instruction moved = w.instructions[from];
  w.instructions.erase(w.instructions.begin() + from);
  if (to > from) --to;
  w.instructions.insert(w.instructions.begin() + to, moved);
}

TEST(ValidatorTest, AShardedStageStepsItsShardExactlyOnce) {
  for (const Sharding sharding :
       {Sharding::kOptimizer, Sharding::kGradientsAndOptimizer}) {
    Schedule missing = ShardedOneFOneB(sharding);
    auto& prog = missing.workers[1].instructions;
    prog.erase(prog.begin() + FindOp(missing.workers[1], OpKind::kShardStep));
    EXPECT_THAT(ValidateSchedule(missing).message(),
                HasSubstr("rank 1 steps its shard of model stage 1 (chunk 0 "
                          "stage 1) 0 times (SHARD_STEP)"));

    Schedule twice = ShardedOneFOneB(sharding);
    const size_t step = FindOp(twice.workers[1], OpKind::kShardStep);
    twice.workers[1].instructions.insert(
        twice.workers[1].instructions.begin() + step,
        twice.workers[1].instructions[step]);
    EXPECT_THAT(ValidateSchedule(twice).message(),
                HasSubstr("steps its shard of model stage 1 (chunk 0 stage 1) "
                          "2 times"));
  }
}

TEST(ValidatorTest, ShardStepsAndGathersOutOfOrderAreDataDependencyErrors) {
  const struct {
    Sharding sharding;
    int rank;
    OpKind moved;
    OpKind before;
    std::string why;
  } cases[] = {
      {Sharding::kGradientsAndOptimizer, 2, OpKind::kShardStep,
       OpKind::kReduceScatterEnd,
       "rank 2 #9 SHARD_STEP chunk=0 stage=0 steps its shard before the "
       "gradients' sum has ended"},
      {Sharding::kOptimizer, 3, OpKind::kAllGatherBegin, OpKind::kShardStep,
       "ALLGATHER_BEGIN chunk=0 stage=1 gathers the shards before stepping "
       "its own (SHARD_STEP)"},
  };
  for (const auto& c : cases) {
    Schedule s = ShardedOneFOneB(c.sharding);
    WorkerProgram& w = s.workers[c.rank];
    MoveBefore(w, FindOp(w, c.moved), FindOp(w, c.before));
    EXPECT_THAT(ValidateSchedule(s).message(), HasSubstr(c.why));
  }
}

TEST(ValidatorTest, AGradientGroupsMembersRunTheSameCollectives) {
  Schedule s = ShardedOneFOneB(Sharding::kGradientsAndOptimizer);
  for (Instruction& inst : s.workers[2].instructions) {
    if (inst.op == OpKind::kReduceScatterBegin)
      inst.op = OpKind::kAllreduceBegin;
    if (inst.op == OpKind::kReduceScatterEnd) inst.op = OpKind::kAllreduceEnd;
  }
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("rank 2 allreduces and steps a shard of model stage 0 "
                        "(chunk 0 stage 0), but rank 0 reduce-scatters and "
                        "steps a shard of"));

  Schedule unsharded = ShardedOneFOneB(Sharding::kNone);
  WorkerProgram& w = unsharded.workers[0];
  const Instruction stage = w.instructions[FindOp(w, OpKind::kAllreduceEnd)];
  for (OpKind op :
       {OpKind::kShardStep, OpKind::kAllGatherBegin, OpKind::kAllGatherEnd}) {
    Instruction inst = stage;
    inst.op = op;
    w.instructions.push_back(inst);
  }
  EXPECT_THAT(ValidateSchedule(unsharded).message(),
              HasSubstr("rank 2 allreduces and steps all of model stage 0 "
                        "(chunk 0 stage 0), but rank 0 allreduces and steps "
                        "a shard of"));
}

TEST(ValidatorTest, AStageOfOneRankHasNoGroupToShardOver) {
  Schedule s = MustGenerate(Params(Scheme::kOneFOneB, 2, 2));
  Instruction step;
  step.op = OpKind::kShardStep;
  s.workers[0].instructions.push_back(step);
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("rank 0 shards model stage 0 (chunk 0 stage 0), which "
                        "no other rank holds: it has no group to shard over"));
}

TEST(ValidatorTest, GathersThatWaitOnEachOtherAreADeadlockNamingTheAllGather) {
  // Chimera D = 2: ranks 0 and 1 both hold model stages 0 and 1. Rank 0
  // waits for stage 0's gather before it begins stage 1's; rank 1 waits for
  // stage 1's before it begins stage 0's.
  ScheduleParams params = Params(Scheme::kChimera, 2, 2);
  params.sharding = Sharding::kGradientsAndOptimizer;
  Schedule s = MustGenerate(params);
  const auto find = [&s](int rank, OpKind op, int model_stage) {
    const auto& program = s.workers[rank].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      if (program[i].op == op &&
          s.topology.ModelStage({program[i].chunk, program[i].stage}) ==
              model_stage) {
        return i;
      }
    }
    ADD_FAILURE() << OpName(op) << " of stage " << model_stage;
    return size_t{0};
  };
  MoveBefore(s.workers[0], find(0, OpKind::kAllGatherEnd, 0),
             find(0, OpKind::kAllGatherBegin, 0) + 1);
  const size_t end = s.workers[1].instructions.size();
  MoveBefore(s.workers[1], find(1, OpKind::kAllGatherBegin, 0), end);
  MoveBefore(s.workers[1], find(1, OpKind::kAllGatherEnd, 0), end);
  const absl::Status status = ValidateSchedule(s);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("for the all-gather begin of rank"));
}

// Breadth-first, D = 2, v = 2, N = 2, W = 2, sharded full: rank 0 holds
// model stages 0 and 2, gathered in three windows (stage 0's forwards, all
// of stage 2's compute, stage 0's backwards); its group partner is rank 2.
Schedule FullyShardedBreadthFirst() {
  ScheduleParams params = Params(Scheme::kBreadthFirst, 2, 2);
  params.chunks = 2;
  params.width = 2;
  params.sharding = Sharding::kFull;
  return MustGenerate(params);
}

// The index of the `nth` (from 0) `op` on chunk `chunk` in `w`.
size_t FindStageOp(const WorkerProgram& w, OpKind op, int chunk, int nth = 0) {
  for (size_t i = 0; i < w.instructions.size(); ++i) {
    if (w.instructions[i].op == op && w.instructions[i].chunk == chunk &&
        nth-- == 0) {
      return i;
    }
  }
  ADD_FAILURE() << OpName(op) << " of chunk " << chunk;
  return 0;
}

TEST(ValidatorTest, AFullyShardedStageIsGatheredForEveryUseAndReleasedAfter) {
  Schedule early = FullyShardedBreadthFirst();
  WorkerProgram& w = early.workers[0];
  MoveBefore(w, FindStageOp(w, OpKind::kReleaseParams, 0),
             FindStageOp(w, OpKind::kForward, 0, 1));
  EXPECT_THAT(ValidateSchedule(early).message(),
              HasSubstr("FORWARD chunk=0 stage=0 mb=1 computes with the stage "
                        "while its parameters are not gathered"));

  Schedule kept = FullyShardedBreadthFirst();
  auto& program = kept.workers[0].instructions;
  program.erase(program.begin() +
                FindStageOp(kept.workers[0], OpKind::kReleaseParams, 0, 1));
  EXPECT_THAT(ValidateSchedule(kept).message(),
              HasSubstr("rank 0 ends with the parameters of model stage 0 "
                        "gathered"));
}

TEST(ValidatorTest, AFullyShardedStageStepsItsShardOnlyOnceReleased) {
  Schedule s = FullyShardedBreadthFirst();
  WorkerProgram& w = s.workers[0];
  MoveBefore(w, FindStageOp(w, OpKind::kShardStep, 1),
             FindStageOp(w, OpKind::kReleaseParams, 1));
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("SHARD_STEP chunk=1 stage=0 steps its shard while a "
                        "gathered copy of its parameters is held"));
}

TEST(ValidatorTest, AFullyShardedGroupsMembersGatherEqually) {
  Schedule s = FullyShardedBreadthFirst();
  auto& program = s.workers[2].instructions;
  Instruction inst;
  inst.chunk = 0;
  inst.stage = 0;
  for (OpKind op : {OpKind::kReleaseParams, OpKind::kAllGatherEnd,
                    OpKind::kAllGatherBegin}) {
    inst.op = op;
    program.insert(program.begin(), inst);
  }
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("rank 2 gathers 3 time(s) and reduce-scatters a shard "
                        "of model stage 0 (chunk 0 stage 0), but rank 0 "
                        "gathers 2 time(s)"));
}

}  // namespace
}  // namespace chimera::schedule
