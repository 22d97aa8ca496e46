// The NCCL communicator's refusals: bad options, and a machine without a
// usable CUDA device, fail creation with a clear status, never a crash or a
// hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "worker/comm/tcp_rendezvous.h"

#ifdef CHIMERA_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "worker/comm/nccl_communicator.h"
#endif

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;

#ifdef CHIMERA_HAVE_NCCL
bool HasCudaDevice() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

// Rank 0 of `options.world_size`, creating its communicator on a store of
// its own on loopback (only failures are expected: no peer ever joins).
absl::StatusOr<std::unique_ptr<Communicator>> CreateRankZero(
    NcclOptions options) {
  options.rank = 0;
  auto rendezvous = TcpRendezvous::Host("127.0.0.1", 0, options.world_size,
                                        absl::Seconds(10));
  if (!rendezvous.ok()) return rendezvous.status();
  return CreateNcclCommunicator(**rendezvous, options);
}

TEST(NcclCommunicatorTest, RefusesClearlyWithoutACudaDevice) {
  if (HasCudaDevice()) GTEST_SKIP() << "this machine has a CUDA device";
  NcclOptions options;
  options.world_size = 1;
  const auto communicator = CreateRankZero(options);
  EXPECT_EQ(communicator.status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(communicator.status().message(),
              HasSubstr("NCCL communicator needs a CUDA device"));
}

TEST(NcclCommunicatorTest, RefusesABadLinkBeforeTouchingCuda) {
  NcclOptions options;
  options.world_size = 2;
  options.links = {{0, 1}, {1, 2}};
  const auto communicator = CreateRankZero(options);
  EXPECT_EQ(communicator.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(communicator.status().message()),
              HasSubstr("p2p link from rank 1 to rank 2 must join two "
                        "distinct ranks of [0, 2)"));
}
#else
TEST(NcclCommunicatorTest, RefusesClearlyWithoutACudaDevice) {
  GTEST_SKIP() << "built without NCCL (CHIMERA_HAVE_NCCL is off)";
}
#endif

}  // namespace
}  // namespace chimera::worker
