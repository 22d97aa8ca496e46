#include "worker/runtime/host_memory.h"

#include "worker/runtime/memory_tracker.h"

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

long PageFaultsToFillANewTensor(int64_t bytes, uint8_t value) {
  const long faults_before = MinorPageFaultsOfThisProcess();
  at::empty({bytes}, at::kByte).fill_(value);
  return MinorPageFaultsOfThisProcess() - faults_before;
}

// A tensor the size of a BERT micro-batch's logits, freed and allocated
// again as every step does, in a process set up as a worker's: a new one
// reuses memory already faulted in. By default glibc maps a block this large
// afresh and unmaps it when freed, so every one of its pages faults again
// (16,384); with LibTorch's own allocator the heap grows instead for up to
// eight rounds.
TEST(HostMemoryTest, ATensorAllocatedAgainReusesFreedMemoryWithoutFaults) {
  RetainFreedHostMemory();
  MemoryTracker::Install();
  constexpr int64_t kBytes = int64_t{64} << 20;
  constexpr long kPages = kBytes / 4096;
  // The first fills start fill_'s thread pool, whose small allocations may
  // land beside the freed block and leave it too small for the next one.
  for (int settling = 0; settling < 2; ++settling) {
    PageFaultsToFillANewTensor(kBytes, 1);
  }
  EXPECT_LT(PageFaultsToFillANewTensor(kBytes, 2), kPages / 10)
      << "page faults for " << kPages << " pages";
}

}  // namespace
}  // namespace chimera::worker
