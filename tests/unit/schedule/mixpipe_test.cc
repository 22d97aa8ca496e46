// MixPipe (MixPipe paper section III): K micro-batches per worker before the
// first backward, Gamma early forwards (2F1B), and K maximizing for N > D.
// Costs F = 1, B = 2 throughout, as in the paper's counts.
//
// The paper's makespan at N = D is (D + N_bubbles)(F + B) with
// N_bubbles = (5D - 3K - 4)/3 - Gamma, i.e. 8D - 3K - 4 - 3*Gamma, and its
// memory budget (eq. 4) is K + Gamma stashed micro-batches per worker. The
// engine keeps every worker within that budget and meets the makespan except
// where kPaperGaps says otherwise (see docs/schedules.md).
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using testing::InteriorIdle;
using testing::MustGenerate;
using testing::MustSimulate;
using testing::Params;

ScheduleParams MixPipe(int d, int n, int k, int gamma) {
  ScheduleParams params = Params(Scheme::kMixPipe, d, n);
  params.mixpipe_k = k;
  params.mixpipe_gamma = gamma;
  return params;
}

int PeakOverWorkers(const SimulationResult& r) {
  int peak = 0;
  for (const WorkerResult& w : r.workers) {
    peak = std::max(peak, w.peak_activations);
  }
  return peak;
}

double PaperMakespan(int d, int k, int gamma) {
  return 8.0 * d - 3 * k - 4 - 3 * gamma;
}

// Budgets K + Gamma for which the engine's order is slower than the paper's
// count, with the makespan it reaches (pinned). D = 8 at budget 2 cannot
// reach 54 with any order: the middle worker D/2-1 must keep each of its
// D/2 down micro-batches stashed >= 13 and each up one >= 10 units within
// [3, 46], 92 > 2 * 43. The others are gaps of the engine's two orders.
const std::map<std::pair<int, int>, double>& PaperGaps() {
  static const auto* gaps = new std::map<std::pair<int, int>, double>{
      {{6, 2}, 46}, {{6, 3}, 37}, {{8, 2}, 78}, {{8, 3}, 65}, {{8, 5}, 47}};
  return *gaps;
}

using Case = std::tuple<int, int, int>;  // D, K, Gamma

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (int d : {4, 6, 8}) {
    for (int k = 2; k <= d; k += 2) {
      for (int gamma = 0; gamma <= (d - k) / 2; ++gamma) {
        cases.emplace_back(d, k, gamma);
      }
    }
  }
  return cases;
}

class MixPipeTest : public ::testing::TestWithParam<Case> {
 protected:
  int d() const { return std::get<0>(GetParam()); }
  int k() const { return std::get<1>(GetParam()); }
  int gamma() const { return std::get<2>(GetParam()); }
  SimulationResult Run(int n, int k, int gamma) const {
    return MustSimulate(MustGenerate(MixPipe(d(), n, k, gamma)));
  }
};

TEST_P(MixPipeTest, MakespanIsAtMostThePapersCountOrThePinnedGap) {
  const double makespan = Run(d(), k(), gamma()).makespan;
  auto gap = PaperGaps().find({d(), k() + gamma()});
  if (gap == PaperGaps().end()) {
    EXPECT_LE(makespan, PaperMakespan(d(), k(), gamma()) + 1e-9);
  } else {
    EXPECT_NEAR(makespan, gap->second, 1e-9);
  }
}

TEST_P(MixPipeTest, EveryWorkerStashesAtMostKPlusGamma) {
  EXPECT_LE(PeakOverWorkers(Run(d(), k(), gamma())), k() + gamma());
}

TEST_P(MixPipeTest, MakespanDoesNotGrowWithKOrGamma) {
  const double makespan = Run(d(), k(), gamma()).makespan;
  if (gamma() + 1 <= (d() - k()) / 2) {
    EXPECT_LE(Run(d(), k(), gamma() + 1).makespan, makespan + 1e-9);
  }
  if (k() + 2 <= d()) {
    EXPECT_LE(Run(d(), k() + 2, std::min(gamma(), (d() - k() - 2) / 2)).makespan,
              makespan + 1e-9);
  }
}

TEST(MixPipeMemoryTest, LargerKStashesMore) {
  for (int d : {4, 6, 8}) {
    for (int k = 2; k + 2 <= d; k += 2) {
      EXPECT_LT(PeakOverWorkers(MustSimulate(MustGenerate(MixPipe(d, d, k, 0)))),
                PeakOverWorkers(MustSimulate(MustGenerate(MixPipe(d, d, k + 2, 0)))))
          << "D = " << d << ", K = " << k;
    }
  }
}

// N = kD runs k basic units one after another: valid, no slower than k
// units alone, and no more memory.
TEST_P(MixPipeTest, MoreMicroBatchesStayValidAndScaleAtMostLinearly) {
  const SimulationResult one = Run(d(), k(), gamma());
  for (int units : {2, 3}) {
    const SimulationResult many = Run(units * d(), k(), gamma());
    EXPECT_LE(many.makespan, units * one.makespan + 1e-9) << units;
    EXPECT_LE(PeakOverWorkers(many), k() + gamma()) << units;
  }
}

INSTANTIATE_TEST_SUITE_P(
    PaperRange, MixPipeTest, ::testing::ValuesIn(AllCases()),
    [](const ::testing::TestParamInfo<Case>& info) {
      return "D" + std::to_string(std::get<0>(info.param)) + "K" +
             std::to_string(std::get<1>(info.param)) + "Gamma" +
             std::to_string(std::get<2>(info.param));
    });

TEST(MixPipeScheduleTest, KEqualsDepthWithoutEarlyForwardsIsChimeraExactly) {
  for (int d : {4, 6, 8}) {
    Schedule mixpipe = MustGenerate(MixPipe(d, d, d, 0));
    Schedule chimera = MustGenerate(Params(Scheme::kChimera, d, d));
    ASSERT_EQ(mixpipe.workers.size(), chimera.workers.size());
    for (size_t r = 0; r < chimera.workers.size(); ++r) {
      EXPECT_EQ(mixpipe.workers[r].instructions, chimera.workers[r].instructions)
          << "D=" << d << " rank " << r;
    }
  }
}

// K maximizing (section III-C): peak (3D/2 - 1) micro-batches, and no
// intermediate bubbles: from N = 3D on (N = 2D still settles one unit of
// idle into the steady state), every further micro-batch adds exactly its
// own work (F + B = 3) to the makespan and nothing to any worker's idle time
// between its first and last op.
class MixPipeKMaximizingTest : public ::testing::TestWithParam<int> {};

TEST_P(MixPipeKMaximizingTest, PeakIsThreeHalvesDepthMinusOne) {
  const int d = GetParam();
  for (int n : {2 * d, 3 * d, 4 * d}) {
    SimulationResult r = MustSimulate(MustGenerate(MixPipe(d, n, 2 * (d - 1), 0)));
    EXPECT_LE(PeakOverWorkers(r), 3 * d / 2 - 1) << "N=" << n;
  }
}

TEST_P(MixPipeKMaximizingTest, InteriorIdleDoesNotGrowWithMicroBatches) {
  const int d = GetParam();
  Schedule base_schedule = MustGenerate(MixPipe(d, 3 * d, 2 * (d - 1), 0));
  SimulationResult base = MustSimulate(base_schedule);
  for (int n : {4 * d, 5 * d}) {
    Schedule s = MustGenerate(MixPipe(d, n, 2 * (d - 1), 0));
    SimulationResult r = MustSimulate(s);
    EXPECT_NEAR(r.makespan, base.makespan + 3.0 * (n - 3 * d), 1e-9) << n;
    for (int rank = 0; rank < d; ++rank) {
      EXPECT_NEAR(InteriorIdle(s, r, rank), InteriorIdle(base_schedule, base, rank),
                  1e-9)
          << "N=" << n << " rank " << rank;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Depths, MixPipeKMaximizingTest,
                         ::testing::Values(4, 6, 8));

}  // namespace
}  // namespace chimera::schedule
