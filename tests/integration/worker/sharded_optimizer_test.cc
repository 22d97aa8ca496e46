// Optimizer-state sharding across real processes on loopback: every member
// steps its shard of a stage's parameters, and after the gather each holds
// the parameters one optimizer over the whole stage computes, while keeping
// the state of its own shard only.
#include "worker/runtime/sharded_optimizer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tests/integration/worker/comm_checks.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/harness/forked_ranks.h"
#include "worker/runtime/gradient_bucket.h"

namespace chimera::worker {
namespace {

using harness::RunForkedRanks;
using testing::ExpectAllRanksSucceeded;

constexpr absl::Duration kTestDeadline = absl::Seconds(90);
constexpr absl::Duration kOpTimeout = absl::Seconds(30);
constexpr int kSteps = 3;

OptimizerConfig AdamW() {
  return {.kind = OptimizerKind::kAdamW, .lr = 0.1, .weight_decay = 0.01};
}

// A stage's parameters: a [3, 5] weight and a [7] bias (22 elements, which
// no group size of the test divides evenly), the same on every rank.
std::vector<at::Tensor> StageParameters() {
  at::Tensor weight = at::linspace(-1, 1, 15, at::kDouble).view({3, 5});
  at::Tensor bias = at::linspace(0.5, 2, 7, at::kDouble);
  return {weight.requires_grad_(true), bias.requires_grad_(true)};
}

// The summed gradient of step `step`, as the allreduce leaves it.
void FillGradients(const std::vector<at::Tensor>& parameters, int step) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters.size(); ++i) {
    at::Tensor gradient = at::Tensor(parameters[i]).mutable_grad();
    gradient.copy_(at::cos(at::arange(gradient.numel(), at::kDouble) +
                           10.0 * step + static_cast<double>(i))
                       .view(gradient.sizes()));
  }
}

absl::Status ExpectEqual(const at::Tensor& actual, const at::Tensor& expected,
                         const std::string& what) {
  if (!at::equal(actual, expected)) {
    return absl::InternalError(
        absl::StrCat(what, " differs from the whole optimizer's by ",
                     (actual - expected).abs().max().item<double>()));
  }
  return absl::OkStatus();
}

// Member `rank` of a group of `members`, for kSteps steps.
absl::Status TrainShard(int rank, int members, TcpRendezvous& rendezvous) {
  GlooOptions options;
  options.rank = rank;
  options.world_size = members;
  options.groups = {{GradientGroupName(0), {}}};
  for (int r = 0; r < members; ++r) options.groups[0].ranks.push_back(r);
  options.timeout = kOpTimeout;
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   CreateGlooCommunicator(rendezvous, options));

  std::vector<at::Tensor> sharded = StageParameters();
  GradientBucket gradients(sharded, GradientBucket::Lifetime::kRun);
  ShardedOptimizer optimizer(AdamW(), FlattenParameters(sharded),
                             {.member = rank, .members = members}, *comm,
                             GradientGroupName(0));
  std::vector<at::Tensor> whole = StageParameters();
  BucketGradients(whole);
  Optimizer reference(AdamW(), whole);

  for (int step = 0; step < kSteps; ++step) {
    FillGradients(sharded, step);
    FillGradients(whole, step);
    optimizer.Step(gradients.Hold());
    gradients.Reset();
    ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> gather,
                     optimizer.StartGather());
    RETURN_IF_ERROR(gather->Wait(kOpTimeout));
    reference.Step();
    for (size_t i = 0; i < whole.size(); ++i) {
      RETURN_IF_ERROR(ExpectEqual(sharded[i], whole[i],
                                  absl::StrCat("parameter ", i, " after step ",
                                               step, " on rank ", rank)));
    }
  }
  RETURN_IF_ERROR(ExpectEqual(gradients.Hold(),
                              at::zeros_like(gradients.Hold()),
                              "the gradients after the step"));
  const ShardRange shard = optimizer.shard();
  const OptimizerState state = optimizer.state();
  if (state.steps != kSteps || state.first_moments.size() != 1 ||
      state.first_moments[0].numel() != shard.size() ||
      state.second_moments[0].numel() != shard.size()) {
    return absl::InternalError(
        absl::StrCat("rank ", rank, " keeps moments of ",
                     state.first_moments[0].numel(), " elements after ",
                     state.steps, " steps; its shard has ", shard.size()));
  }
  return absl::OkStatus();
}

class ShardedOptimizerTest : public ::testing::TestWithParam<int> {};

TEST_P(ShardedOptimizerTest, MembersGatherWhatOneOptimizerComputesFromShards) {
  const int members = GetParam();
  ExpectAllRanksSucceeded(RunForkedRanks(
      members, kTestDeadline, [members](int rank, TcpRendezvous& rendezvous) {
        return TrainShard(rank, members, rendezvous);
      }));
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, ShardedOptimizerTest,
                         ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, "Members");
                         });

}  // namespace
}  // namespace chimera::worker
