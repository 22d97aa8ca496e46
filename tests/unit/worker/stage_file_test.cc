// A checkpoint step's stage files: their names, and a stage put together
// again from the parts that the members of a sharded stage's group wrote,
// with every piece of the moments where it belongs, or refused naming what
// is missing or does not fit. Whole checkpoints under other partitions:
// checkpoint_test.cc; sharded jobs resuming under other plans and shardings:
// tests/integration/worker/pipeline_equivalence_test.cc.
#include "worker/runtime/stage_file.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;

TEST(StageFileNameTest, AWholeStageAndItsPartsHaveTheirOwnNames) {
  EXPECT_EQ(StageFileName({{0, 4}, {0, 1}}), "blocks-0-4.pt");
  EXPECT_EQ(StageFileName({{4, 8}, {2, 3}}), "blocks-4-8.part-2-of-3.pt");
  for (const StageFileId id :
       {StageFileId{{0, 4}, {0, 1}}, StageFileId{{4, 8}, {2, 3}},
        StageFileId{{1, 12}, {0, 16}}}) {
    const std::optional<StageFileId> parsed =
        ParseStageFileName(StageFileName(id));
    ASSERT_TRUE(parsed.has_value()) << StageFileName(id);
    EXPECT_EQ(parsed->blocks.begin, id.blocks.begin);
    EXPECT_EQ(parsed->blocks.end, id.blocks.end);
    EXPECT_EQ(parsed->part.member, id.part.member);
    EXPECT_EQ(parsed->part.members, id.part.members);
  }
}

TEST(StageFileNameTest, OtherNamesAreNoStageFiles) {
  for (const char* name :
       {"blocks-0-4.pt.tmp-1", "blocks-4-0.pt", "blocks-0-4.part-2-of-2.pt",
        "blocks-0-4.part-0-of-1.pt", "blocks-0-4.part--1-of-2.pt",
        "blocks-0-4.part-0-of-2", "blocks-0-4.part-0.pt", "attempt",
        "blocks--1-4.pt", "blocks-0-4.part-0-of-2.pt.part-1-of-2.pt"}) {
    EXPECT_FALSE(ParseStageFileName(name).has_value()) << name;
  }
}

// A stage of two parameters, a [2, 3] and b [4], whose optimizer state two
// members shard: member 0 saved the parameters, a's moments whole and the
// first two elements of b's; member 1 the rest of b's.
class StageAssemblyTest : public ::testing::Test {
 protected:
  StageAssemblyTest() {
    held_ = {{"a", at::zeros({2, 3}, at::kDouble)},
             {"b", at::zeros({4}, at::kDouble)}};
  }

  StagePart Part(int member) const {
    StagePart part;
    part.part = {member, 2};
    part.optimizer_steps = 3;
    if (member == 0) {
      part.parameters = {{"a", a_}, {"b", b_}};
      part.moments.push_back({"a", std::nullopt, first_a_, second_a_});
      part.moments.push_back(
          {"b", 0, first_b_.narrow(0, 0, 2), second_b_.narrow(0, 0, 2)});
    } else {
      part.moments.push_back(
          {"b", 2, first_b_.narrow(0, 2, 2), second_b_.narrow(0, 2, 2)});
    }
    return part;
  }

  std::vector<NamedTensor> held_;
  const at::Tensor a_ = at::rand({2, 3}, at::kDouble);
  const at::Tensor b_ = at::rand({4}, at::kDouble);
  const at::Tensor first_a_ = at::rand({2, 3}, at::kDouble);
  const at::Tensor second_a_ = at::rand({2, 3}, at::kDouble);
  const at::Tensor first_b_ = at::rand({4}, at::kDouble);
  const at::Tensor second_b_ = at::rand({4}, at::kDouble);
};

TEST_F(StageAssemblyTest, ThePartsPutTheWholeStateTogether) {
  StageAssembly assembly(held_);
  // In either order.
  ASSERT_TRUE(assembly.Add(ToDict(Part(1)), "part-1").ok());
  ASSERT_TRUE(assembly.Add(ToDict(Part(0)), "part-0").ok());
  const absl::StatusOr<StageState> state = assembly.Finish();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->optimizer.steps, 3);
  ASSERT_EQ(state->parameters.size(), 2u);
  EXPECT_EQ(state->parameters[0].first, "a");
  EXPECT_TRUE(at::equal(state->parameters[0].second, a_));
  EXPECT_TRUE(at::equal(state->parameters[1].second, b_));
  EXPECT_TRUE(at::equal(state->optimizer.first_moments[0], first_a_));
  EXPECT_TRUE(at::equal(state->optimizer.second_moments[0], second_a_));
  EXPECT_TRUE(at::equal(state->optimizer.first_moments[1], first_b_));
  EXPECT_TRUE(at::equal(state->optimizer.second_moments[1], second_b_));
}

// Sharding full: each part holds its shard of the parameters too, here a
// and b's first two elements, then b's last two.
StagePart FullyShardedPart(const StagePart& part, const at::Tensor& a,
                           const at::Tensor& b) {
  StagePart sharded = part;
  sharded.parameters.clear();
  const int64_t first = part.part.member == 0 ? 0 : 2;
  if (first == 0) sharded.parameters = {{"a", a}};
  sharded.parameter_pieces = {{"b", first, {4}, b.narrow(0, first, 2)}};
  return sharded;
}

TEST_F(StageAssemblyTest, PiecesOfTheParametersAreJoinedAsTheMomentsAre) {
  StageAssembly assembly(held_);
  const TensorDict second = ToDict(FullyShardedPart(Part(1), a_, b_));
  ASSERT_TRUE(assembly.Add(second, "part-1").ok());
  ASSERT_TRUE(
      assembly.Add(ToDict(FullyShardedPart(Part(0), a_, b_)), "part-0").ok());
  const absl::StatusOr<StageState> state = assembly.Finish();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(at::equal(state->parameters[0].second, a_));
  EXPECT_TRUE(at::equal(state->parameters[1].second, b_));
  // A checkpoint's parameters read without a model: pieces with their shape.
  EXPECT_TRUE(ParametersOf(second).empty());
  const absl::StatusOr<std::vector<ParameterPiece>> pieces =
      ParameterPiecesOf(second, "part-1");
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 1u);
  EXPECT_EQ((*pieces)[0].offset, 2);
  EXPECT_EQ((*pieces)[0].shape, std::vector<int64_t>{4});
}

TEST_F(StageAssemblyTest, AMissingPieceOfAParameterIsRefusedNamingIt) {
  StageAssembly assembly(held_);
  ASSERT_TRUE(
      assembly.Add(ToDict(FullyShardedPart(Part(0), a_, b_)), "part-0").ok());
  EXPECT_THAT(assembly.Finish().status().message(),
              HasSubstr("the pieces of parameter b's values cover elements "
                        "[0, 2) of 4"));
}

TEST_F(StageAssemblyTest, AMissingPartIsRefusedNamingTheParameter) {
  StageAssembly assembly(held_);
  ASSERT_TRUE(assembly.Add(ToDict(Part(0)), "part-0").ok());
  const absl::StatusOr<StageState> state = assembly.Finish();
  EXPECT_EQ(state.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(state.status().message(),
              HasSubstr("parameter b's first moment cover elements [0, 2) "
                        "of 4"));
}

TEST_F(StageAssemblyTest, APieceOutsideItsParameterIsRefusedNamingTheFile) {
  StagePart part = Part(1);
  part.moments[0].offset = 3;
  StageAssembly assembly(held_);
  const absl::Status added = assembly.Add(ToDict(part), "'ck/part-1'");
  EXPECT_EQ(added.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(added.message(), HasSubstr("'ck/part-1' holds a piece of "
                                         "first_moment/b of 2 elements from "
                                         "element 3"));
}

TEST_F(StageAssemblyTest, PartsOfDifferentStepsAreRefused) {
  StagePart later = Part(1);
  later.optimizer_steps = 4;
  StageAssembly assembly(held_);
  ASSERT_TRUE(assembly.Add(ToDict(Part(0)), "part-0").ok());
  const absl::Status added = assembly.Add(ToDict(later), "part-1");
  EXPECT_EQ(added.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(added.message(), HasSubstr("after 4 steps; another file of "
                                         "the stage after 3"));
}

TEST_F(StageAssemblyTest, OptimizerStepsThatAreNoNumberAreRefused) {
  TensorDict dict = ToDict(Part(0));
  dict.insert_or_assign("optimizer_steps", at::zeros({2}, at::kLong));
  StageAssembly assembly(held_);
  const absl::Status added = assembly.Add(dict, "part-0");
  EXPECT_EQ(added.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(added.message(), HasSubstr("part-0 holds optimizer_steps of 2 "
                                         "elements"));
}

TEST_F(StageAssemblyTest, OverlappingPiecesAreRefused) {
  StagePart overlapping = Part(1);
  overlapping.moments[0].offset = 1;
  StageAssembly assembly(held_);
  ASSERT_TRUE(assembly.Add(ToDict(Part(0)), "part-0").ok());
  ASSERT_TRUE(assembly.Add(ToDict(overlapping), "part-1").ok());
  EXPECT_THAT(assembly.Finish().status().message(),
              HasSubstr("parameter b's first moment cover elements [0, 2) of "
                        "4, then stop or overlap"));
}

}  // namespace
}  // namespace chimera::worker
