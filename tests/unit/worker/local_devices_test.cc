#include "worker/daemon/local_devices.h"

#include <gtest/gtest.h>

namespace chimera::worker {
namespace {

// CUDA's names for the GPUs, as cudaGetDeviceProperties gives them.
TEST(LocalDevicesTest, KnownGpusHaveTheirDenseBf16Peak) {
  EXPECT_EQ(KnownPeakFlops("NVIDIA H100 80GB HBM3"), 989e12);
  EXPECT_EQ(KnownPeakFlops("NVIDIA H100 PCIe"), 756e12);
  EXPECT_EQ(KnownPeakFlops("NVIDIA H100 NVL"), 835e12);
  EXPECT_EQ(KnownPeakFlops("NVIDIA H200"), 989e12);
  EXPECT_EQ(KnownPeakFlops("NVIDIA A100-SXM4-80GB"), 312e12);
  EXPECT_EQ(KnownPeakFlops("NVIDIA L40S"), 362e12);
  EXPECT_EQ(KnownPeakFlops("NVIDIA L4"), 121e12);
}

TEST(LocalDevicesTest, OtherDevicesHaveNoKnownPeak) {
  EXPECT_EQ(KnownPeakFlops("cpu"), std::nullopt);
  EXPECT_EQ(KnownPeakFlops("Tesla T4"), std::nullopt);
}

}  // namespace
}  // namespace chimera::worker
