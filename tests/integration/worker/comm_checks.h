// Checks the communicator tests share: a rank's body reports a tensor that
// does not hold the expected value as a status (its process then exits 1),
// and the parent expects every forked rank to have succeeded.
#ifndef CHIMERA_TESTS_INTEGRATION_WORKER_COMM_CHECKS_H_
#define CHIMERA_TESTS_INTEGRATION_WORKER_COMM_CHECKS_H_

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "worker/harness/forked_ranks.h"

namespace chimera::worker::testing {

inline absl::Status ExpectFilledWith(const at::Tensor& tensor, double value,
                                     absl::string_view what) {
  if (!at::equal(tensor, at::full_like(tensor, value))) {
    return absl::InternalError(
        absl::StrCat(what, ": expected every element to be ", value,
                     ", first is ", tensor.flatten()[0].item<double>()));
  }
  return absl::OkStatus();
}

inline void ExpectAllRanksSucceeded(
    const std::vector<harness::RankExit>& exits) {
  for (const harness::RankExit& exit : exits) EXPECT_TRUE(exit.ok()) << exit;
}

}  // namespace chimera::worker::testing

#endif  // CHIMERA_TESTS_INTEGRATION_WORKER_COMM_CHECKS_H_
