// Hundreds of random valid parameter sets per scheme: every generated set of
// programs validates, simulates, survives the CSV and proto round trips, and
// corrupting it (dropping a receive, swapping two receives) is caught.
#include <random>

#include "gtest/gtest.h"
#include "schedule/csv_io.h"
#include "schedule/program_proto.h"
#include "schedule/step_unrolling.h"
#include "schedule/torch_csv.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

constexpr int kCasesPerScheme = 200;

// A random parameter set that ValidateScheduleParams accepts.
ScheduleParams RandomParams(Scheme scheme, std::mt19937& rng) {
  auto uniform = [&rng](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  ScheduleParams p;
  p.scheme = scheme;
  p.depth = uniform(1, 10);
  p.micro_batches = uniform(1, 24);
  p.width = uniform(1, 3);
  p.backward_slots = uniform(1, 3);
  p.recompute = uniform(0, 3) == 0;
  p.sync = static_cast<Sync>(uniform(0, 2));
  p.policy = static_cast<WarmupPolicy>(uniform(0, 1));
  switch (scheme) {
    case Scheme::kChimera:
    case Scheme::kChimeraZb: {
      p.depth = 2 * uniform(1, 6);
      std::vector<int> fs;
      for (int f = 1; f <= p.depth / 2; ++f) {
        if ((p.depth / 2) % f == 0) fs.push_back(f);
      }
      p.pipelines = 2 * fs[uniform(0, static_cast<int>(fs.size()) - 1)];
      if (scheme == Scheme::kChimera) {
        p.concat = static_cast<Concat>(uniform(0, 2));
      }
      break;
    }
    case Scheme::kMixPipe:
      p.depth = 2 * uniform(1, 5);
      if (p.micro_batches > p.depth && uniform(0, 2) == 0) {
        p.mixpipe_k = 2 * (p.depth - 1);
      } else {
        p.mixpipe_k = 2 * uniform(1, p.depth / 2);
      }
      p.mixpipe_gamma = uniform(0, std::max(0, (p.depth - p.mixpipe_k) / 2));
      break;
    case Scheme::kInterleaved:
      p.chunks = uniform(1, 4);
      p.micro_batches = p.depth * uniform(1, 4);
      break;
    case Scheme::kBreadthFirst:
      p.chunks = uniform(1, 4);
      break;
    case Scheme::kDualPipeV:
      p.micro_batches = 2 * p.depth + uniform(0, 6);
      break;
    case Scheme::kZbAuto:
      p.activation_limit = uniform(0, p.micro_batches);
      break;
    case Scheme::kPipeDream:
    case Scheme::kPipeDream2Bw:
      p.width = 1;
      p.micro_batches = p.depth + uniform(0, 8);
      break;
    default:
      break;
  }
  // Where some stage has a group to shard over.
  p.sharding = static_cast<Sharding>(uniform(0, 3));
  if (!ValidateScheduleParams(p).empty()) p.sharding = Sharding::kNone;
  return p;
}

std::string Describe(const ScheduleParams& p) {
  return absl::StrCat(
      SchemeName(p.scheme), " D=", p.depth, " N=", p.micro_batches,
      " W=", p.width, " 2f=", p.pipelines, " concat=", ConcatName(p.concat),
      " v=", p.chunks, " K=", p.mixpipe_k, " G=", p.mixpipe_gamma,
      " slots=", p.backward_slots, " sync=", SyncName(p.sync),
      " limit=", p.activation_limit, " sharding=", ShardingName(p.sharding));
}

class RandomScheduleTest : public ::testing::TestWithParam<Scheme> {};

TEST_P(RandomScheduleTest, EveryRandomValidParameterSetValidates) {
  std::mt19937 rng(1234 + static_cast<int>(GetParam()));
  for (int i = 0; i < kCasesPerScheme; ++i) {
    ScheduleParams params = RandomParams(GetParam(), rng);
    ASSERT_TRUE(ValidateScheduleParams(params).empty()) << Describe(params);
    absl::StatusOr<Schedule> s = GenerateSchedule(params);
    ASSERT_TRUE(s.ok()) << Describe(params) << ": " << s.status();
    absl::Status valid = ValidateSchedule(*s);
    ASSERT_TRUE(valid.ok()) << Describe(params) << ": " << valid;
    absl::StatusOr<SimulationResult> r =
        s->topology.repeating ? Simulate(*UnrollSteps(*s, 2), CostModel())
                              : Simulate(*s, CostModel());
    ASSERT_TRUE(r.ok()) << Describe(params);
    EXPECT_GE(r->bubble_ratio, 0) << Describe(params);
    EXPECT_LT(r->bubble_ratio, 1) << Describe(params);
  }
}

TEST_P(RandomScheduleTest, CsvAndProtoRoundTripsPreserveThePrograms) {
  std::mt19937 rng(99 + static_cast<int>(GetParam()));
  for (int i = 0; i < 20; ++i) {
    ScheduleParams params = RandomParams(GetParam(), rng);
    absl::StatusOr<Schedule> s = GenerateSchedule(params);
    ASSERT_TRUE(s.ok()) << s.status();
    absl::StatusOr<Schedule> csv = ReadScheduleCsv(WriteScheduleCsv(*s));
    ASSERT_TRUE(csv.ok()) << csv.status();
    absl::StatusOr<Schedule> proto = FromProto(s->topology, ToProto(*s));
    ASSERT_TRUE(proto.ok()) << proto.status();
    for (const Schedule* back : {&*csv, &*proto}) {
      ASSERT_EQ(back->workers.size(), s->workers.size());
      for (size_t r = 0; r < s->workers.size(); ++r) {
        EXPECT_EQ(back->workers[r].instructions, s->workers[r].instructions)
            << Describe(params);
        EXPECT_EQ(back->workers[r].stages, s->workers[r].stages);
      }
    }
  }
}

// Where torch.distributed.pipelining's CSV can hold the schedule (stages on
// one rank each), it reads back to the same compute order on every rank of
// a replica, executable and valid.
TEST_P(RandomScheduleTest, TorchCsvRoundTripKeepsTheComputeOrder) {
  std::mt19937 rng(5 + static_cast<int>(GetParam()));
  for (int i = 0; i < 20; ++i) {
    ScheduleParams params = RandomParams(GetParam(), rng);
    absl::StatusOr<Schedule> s = GenerateSchedule(params);
    ASSERT_TRUE(s.ok()) << s.status();
    absl::StatusOr<std::string> csv = WriteTorchScheduleCsv(*s);
    if (!csv.ok()) {
      EXPECT_TRUE(IsBidirectional(params.scheme) ||
                  IsAsynchronous(params.scheme) ||
                  params.concat != Concat::kDirect)
          << Describe(params) << ": " << csv.status();
      continue;
    }
    absl::StatusOr<Schedule> back = ReadTorchScheduleCsv(*csv);
    ASSERT_TRUE(back.ok()) << Describe(params) << ": " << back.status();
    ASSERT_TRUE(ValidateSchedule(*back).ok()) << Describe(params);
    for (int r = 0; r < params.depth; ++r) {
      std::vector<std::pair<OpKind, int>> want, got;
      for (const Instruction& inst : s->workers[r].instructions) {
        if (IsCompute(inst.op)) want.push_back({inst.op, inst.micro_batches[0]});
      }
      for (const Instruction& inst : back->workers[r].instructions) {
        if (IsCompute(inst.op)) got.push_back({inst.op, inst.micro_batches[0]});
      }
      EXPECT_EQ(got, want) << Describe(params) << " rank " << r;
    }
  }
}

TEST_P(RandomScheduleTest, DroppingAnyReceiveIsRejected) {
  std::mt19937 rng(7 + static_cast<int>(GetParam()));
  int corrupted = 0;
  for (int i = 0; i < 50; ++i) {
    ScheduleParams params = RandomParams(GetParam(), rng);
    absl::StatusOr<Schedule> s = GenerateSchedule(params);
    ASSERT_TRUE(s.ok());
    std::vector<std::pair<int, size_t>> receives;
    for (const WorkerProgram& w : s->workers) {
      for (size_t j = 0; j < w.instructions.size(); ++j) {
        OpKind op = w.instructions[j].op;
        if (op == OpKind::kRecvAct || op == OpKind::kRecvGrad) {
          receives.push_back({w.rank, j});
        }
      }
    }
    if (receives.empty()) continue;
    auto [rank, index] = receives[rng() % receives.size()];
    auto& prog = s->workers[rank].instructions;
    prog.erase(prog.begin() + index);
    EXPECT_FALSE(ValidateSchedule(*s).ok()) << Describe(params);
    ++corrupted;
  }
  EXPECT_GT(corrupted, 0);
}

// Moving a RECV_GRAD before the forward that produces the activation it
// answers makes that gradient impossible: always a deadlock (or, in a
// repeating step, a receive out of its channel's order).
TEST_P(RandomScheduleTest, ReceivingAGradientBeforeSendingItsActivationDeadlocks) {
  std::mt19937 rng(5 + static_cast<int>(GetParam()));
  int corrupted = 0;
  for (int i = 0; i < 50; ++i) {
    ScheduleParams params = RandomParams(GetParam(), rng);
    absl::StatusOr<Schedule> s = GenerateSchedule(params);
    ASSERT_TRUE(s.ok());
    for (WorkerProgram& w : s->workers) {
      auto& prog = w.instructions;
      // A repeating step's first receive may answer the previous step.
      auto recv =
          std::find_if(prog.begin(), prog.end(), [](const Instruction& x) {
            return x.op == OpKind::kRecvGrad && !ActsOnPreviousStep(x);
          });
      if (recv == prog.end()) continue;
      Instruction moved = *recv;
      prog.erase(recv);
      prog.insert(prog.begin(), moved);
      absl::Status status = ValidateSchedule(*s);
      ++corrupted;
      if (s->topology.repeating &&
          status.message().find("received out of send order") !=
              std::string::npos) {
        // Unrolled, the moved receive of each step after the first also
        // overtakes the previous step's: matching catches that first.
        break;
      }
      EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition)
          << Describe(params) << ": " << status;
      EXPECT_NE(status.message().find("deadlock"), std::string::npos);
      break;
    }
  }
  EXPECT_GT(corrupted, 0);
}

INSTANTIATE_TEST_SUITE_P(
    AllSchemes, RandomScheduleTest,
    ::testing::Values(Scheme::kGpipe, Scheme::kOneFOneB, Scheme::kGems,
                      Scheme::kChimera, Scheme::kMixPipe, Scheme::kInterleaved,
                      Scheme::kBreadthFirst, Scheme::kZbH1, Scheme::kZbH2,
                      Scheme::kZbAuto, Scheme::kZbV, Scheme::kDualPipeV,
                      Scheme::kChimeraZb, Scheme::kPipeDream,
                      Scheme::kPipeDream2Bw),
    [](const ::testing::TestParamInfo<Scheme>& info) {
      std::string name = SchemeName(info.param);
      name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
      return name == "1f1b" ? std::string("OneFOneB") : name;
    });

}  // namespace
}  // namespace chimera::schedule
