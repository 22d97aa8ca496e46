// The validator accepts generated schedules and rejects corrupted ones with
// a message that says what is wrong (for deadlocks: the wait-for cycle).
#include <algorithm>

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

}  // namespace
}  // namespace chimera::schedule
