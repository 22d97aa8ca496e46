#include "worker/runtime/host_memory.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

namespace chimera::worker {
namespace {

long MinorPageFaultsOfThisProcess() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// A tensor the size of a BERT micro-batch's logits, freed and allocated
// again as every step does: the second one reuses memory already faulted in.
// By default glibc maps a block this large afresh and unmaps it when freed,
// so every one of its pages faults again (16,384 of them).
TEST(HostMemoryTest, ATensorAllocatedAgainReusesFreedMemoryWithoutFaults) {
  RetainFreedHostMemory();
  constexpr int64_t kBytes = int64_t{64} << 20;
  constexpr long kPages = kBytes / 4096;
  at::empty({kBytes}, at::kByte).fill_(1);
  const long faults_before = MinorPageFaultsOfThisProcess();
  at::empty({kBytes}, at::kByte).fill_(2);
  const long faults = MinorPageFaultsOfThisProcess() - faults_before;
  EXPECT_LT(faults, kPages / 10) << "page faults for " << kPages << " pages";
}

}  // namespace
}  // namespace chimera::worker
