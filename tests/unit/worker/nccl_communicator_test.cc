// The NCCL communicator's refusals: bad options, and a machine without a
// usable CUDA device, fail creation with a clear status, never a crash or a
// hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

TEST(NcclCommunicatorTest, RefusesClearlyWithoutACudaDevice) {
  if (HasCudaDevice()) GTEST_SKIP() << "this machine has a CUDA device";
  auto rendezvous =
      TcpRendezvous::Host("127.0.0.1", 0, /*world_size=*/1, absl::Seconds(10));
  ASSERT_TRUE(rendezvous.ok()) << rendezvous.status();
  NcclOptions options;
  options.rank = 0;
  options.world_size = 1;
  const auto communicator = CreateNcclCommunicator(**rendezvous, options);
  EXPECT_EQ(communicator.status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(communicator.status().message(),
              HasSubstr("NCCL communicator needs a CUDA device"));
}

TEST(NcclCommunicatorTest, RefusesABadLinkBeforeTouchingCuda) {
  auto rendezvous =
      TcpRendezvous::Host("127.0.0.1", 0, /*world_size=*/2, absl::Seconds(10));
  ASSERT_TRUE(rendezvous.ok()) << rendezvous.status();
  NcclOptions options;
  options.rank = 0;
  options.world_size = 2;
  options.links = {{0, 1}, {1, 2}};
  const auto communicator = CreateNcclCommunicator(**rendezvous, options);
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
