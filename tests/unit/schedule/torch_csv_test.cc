// torch.distributed.pipelining's CSV: every scheme it can hold round-trips
// to the same compute order and step, a ZB-V file as PyTorch writes it
// (idle cells, lowered communication, overlapped pairs) imports and
// validates, and malformed files are refused naming their row and column.
#include "schedule/torch_csv.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using ::testing::HasSubstr;
using testing::MustGenerate;
using testing::Params;

// Each rank's compute ops as (op, model stage, micro-batch) cells.
std::vector<std::vector<std::string>> ComputeOrder(const Schedule& schedule,
                                                   int ranks) {
  std::vector<std::vector<std::string>> order(ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    for (const Instruction& inst : schedule.workers[rank].instructions) {
      if (!IsCompute(inst.op)) continue;
      order[rank].push_back(absl::StrCat(
          OpName(inst.op), " ", schedule.topology.ModelStage({inst.chunk, inst.stage}),
          " ", inst.micro_batches[0]));
    }
  }
  return order;
}

SimulationResult SimulateHalves(const Schedule& schedule) {
  CostModel costs;
  costs.backward_input = 1;
  costs.backward_weight = 1;
  absl::StatusOr<SimulationResult> result = Simulate(schedule, costs);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : SimulationResult();
}

Schedule MustRead(const std::string& csv) {
  absl::StatusOr<Schedule> schedule = ReadTorchScheduleCsv(csv);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  if (!schedule.ok()) return Schedule();
  const absl::Status valid = ValidateSchedule(*schedule);
  EXPECT_TRUE(valid.ok()) << valid;
  return *std::move(schedule);
}

class TorchCsvRoundTripTest
    : public ::testing::TestWithParam<std::tuple<Scheme, int, int, int>> {};

TEST_P(TorchCsvRoundTripTest, KeepsTheComputeOrderAndTheStep) {
  const auto& [scheme, depth, micro_batches, chunks] = GetParam();
  ScheduleParams params = Params(scheme, depth, micro_batches);
  params.chunks = chunks;
  const Schedule generated = MustGenerate(params);
  absl::StatusOr<std::string> csv = WriteTorchScheduleCsv(generated);
  ASSERT_TRUE(csv.ok()) << csv.status();
  const Schedule read = MustRead(*csv);
  EXPECT_EQ(ComputeOrder(read, depth), ComputeOrder(generated, depth));
  EXPECT_DOUBLE_EQ(SimulateHalves(read).makespan,
                   SimulateHalves(generated).makespan);
  EXPECT_EQ(WriteTorchScheduleCsv(read).value_or(""), *csv);
}

INSTANTIATE_TEST_SUITE_P(
    EverySchemeOnOneRankPerStage, TorchCsvRoundTripTest,
    ::testing::Values(std::tuple(Scheme::kGpipe, 4, 4, 1),
                      std::tuple(Scheme::kOneFOneB, 4, 8, 1),
                      std::tuple(Scheme::kInterleaved, 4, 8, 2),
                      std::tuple(Scheme::kBreadthFirst, 4, 4, 2),
                      std::tuple(Scheme::kZbH1, 4, 8, 1),
                      std::tuple(Scheme::kZbV, 4, 8, 1),
                      std::tuple(Scheme::kDualPipeV, 4, 8, 1)),
    [](const auto& info) {
      std::string name = SchemeName(std::get<0>(info.param));
      name.erase(std::remove(name.begin(), name.end(), '-'), name.end());
      return name == "1f1b" ? std::string("OneFOneB") : name;
    });

// Stages that run as replicas on two ranks have no form in the format.
TEST(TorchCsvTest, BidirectionalSchedulesAreRefusedSayingWhy) {
  for (Scheme scheme : {Scheme::kChimera, Scheme::kGems, Scheme::kMixPipe,
                        Scheme::kChimeraZb}) {
    absl::StatusOr<std::string> csv =
        WriteTorchScheduleCsv(MustGenerate(Params(scheme, 4, 4)));
    EXPECT_EQ(csv.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(csv.status().message()),
                HasSubstr("replicas on two or more ranks"))
        << SchemeName(scheme);
  }
}

// ZB-V at p = 2, n = 4 as PyTorch's ScheduleZBVZeroBubble orders it, rank 1
// led by its idle step, with a lowered transfer and an overlapped pair
// thrown in: our zbv, action for action.
TEST(TorchCsvTest, ImportsPyTorchsZbV) {
  const std::string csv =
      "0F0,0SEND_F0,0F1,0F2,3F0,3I0,3W0,3F1,3I1,3W1,0F3,0I0,0W0,3F2,3I2,3W2,"
      "0I1,0W1,3F3,3I3,3W3,0I2,0W2,0I3,0W3\r\n"
      ",1RECV_F0,1F0,2F0,1F1,2F1,2I0,2W0,1F2,1I0,1W0,2F2,2I1,2W1,"
      "(1F3;1I1)OVERLAP_F_B,1W1,2F3,2I2,2W2,1I2,2I3,1I3,1W2,2W3,1W3,"
      "1REDUCE_GRAD\r\n";
  const Schedule read = MustRead(csv);
  EXPECT_EQ(read.topology.depth, 2);
  EXPECT_EQ(read.topology.num_chunks, 2);
  EXPECT_EQ(read.topology.micro_batches, 4);
  const Schedule zbv = MustGenerate(Params(Scheme::kZbV, 2, 4));
  EXPECT_EQ(ComputeOrder(read, 2), ComputeOrder(zbv, 2));
  EXPECT_DOUBLE_EQ(SimulateHalves(read).makespan, SimulateHalves(zbv).makespan);
}

struct BadFile {
  std::string name;
  std::string csv;
  std::string error;
};

class TorchCsvErrorTest : public ::testing::TestWithParam<BadFile> {};

TEST_P(TorchCsvErrorTest, IsRefusedSayingWhere) {
  absl::StatusOr<Schedule> read = ReadTorchScheduleCsv(GetParam().csv);
  ASSERT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    MalformedFiles, TorchCsvErrorTest,
    ::testing::Values(
        BadFile{"Empty", "\n\n", "no rows"},
        BadFile{"NoStage", "0F0,F1\n", "row 1, column 2: 'F1' does not start"},
        BadFile{"UnknownKind", "0F0\n1F0,1X0\n",
                "row 2, column 2: '1X0' is not an action"},
        BadFile{"NoMicroBatch", "0F0,0B\n",
                "row 1, column 2: '0B': the micro-batch"},
        BadFile{"OpenGroup", "0F0,(0B0;0F1\n", "row 1, column 2"},
        BadFile{"StageOnTwoRanks", "0F0,1F0,1B0,0B0\n1F0,1B0\n",
                "row 2, column 1: stage 1 is on rank 0"},
        BadFile{"UnevenStages", "0F0,1F0,1B0,0B0\n2F0,2B0\n",
                "stages 0..2, which 2 ranks"},
        // Two rows hold a V between them and two run nothing (a blank line,
        // a row of REDUCE_GRAD only): no rank may idle while another holds
        // two stages of one chunk. Found by the fuzzer.
        BadFile{"RowsThatRunNothing",
                "0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n\n,1REDUCE_GRAD\n",
                "row 1 (rank 0) runs 2 of the 4 stages; each of the 4 rows "
                "must run 1"},
        BadFile{"RepeatedForward", "0F0,0F0,0B0\n",
                "row 1, column 2: FORWARD of stage 0 micro-batch 0 again"},
        BadFile{"MissingWeightHalf", "0F0,0I0\n", "has its I but no W"},
        BadFile{"WholeAndHalf", "0F0,0B0,0W0\n", "a whole backward"},
        BadFile{"MissingMicroBatch", "0F0,0B0,0F2,0B2\n",
                "stage 0 micro-batch 1 has no forward"},
        BadFile{"HugeStage", "99999999999F0\n", "stage number up to"},
        BadFile{"CannotRun", "0F0,0W0,0I0\n", "cannot run in this order"},
        // Rank 0 takes micro-batch 1's gradient before 0's, which rank 1
        // sends first. Found by the fuzzer.
        BadFile{"GradientsTakenOutOfSendOrder",
                "0F0,0F1,0B1,0F2,0B0,0B2\n1F0,1B0,1F1,1B1,1F2,1B2\n",
                "the rows make no valid schedule: p2p received out of send "
                "order"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace chimera::schedule
