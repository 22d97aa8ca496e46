#include "worker/comm/shared_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/match.h"

namespace chimera::worker {
namespace {

constexpr size_t kBytes = 1 << 16;

// A new segment and a second mapping of it, opened by its name.
class SharedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<SharedMemorySegment> segment =
        SharedMemorySegment::Create(RandomSegmentName(), kBytes);
    ASSERT_TRUE(segment.ok()) << segment.status();
    created = std::move(*segment);
    segment = SharedMemorySegment::Open(created->name(), kBytes);
    ASSERT_TRUE(segment.ok()) << segment.status();
    opened = std::move(*segment);
  }

  std::optional<SharedMemorySegment> created;
  std::optional<SharedMemorySegment> opened;
};

TEST_F(SharedMemoryTest, ASegmentOpenedByNameSharesItsBytes) {
  EXPECT_NE(created->data(), opened->data());
  std::memcpy(created->data(), "chimera", 8);
  EXPECT_STREQ(static_cast<const char*>(opened->data()), "chimera");
  EXPECT_EQ(static_cast<const char*>(opened->data())[kBytes - 1], 0)
      << "a new segment is zero-filled";
}

TEST_F(SharedMemoryTest, AnUnlinkedNameIsGoneButItsMappingsStay) {
  created->Unlink();
  EXPECT_EQ(SharedMemorySegment::Open(created->name(), kBytes).status().code(),
            absl::StatusCode::kNotFound);
  static_cast<char*>(created->data())[7] = 42;
  EXPECT_EQ(static_cast<const char*>(opened->data())[7], 42);
}

TEST(SharedMemorySegmentTest, TheCreatorsSegmentIsUnlinkedWhenItGoes) {
  std::string name;
  {
    absl::StatusOr<SharedMemorySegment> created =
        SharedMemorySegment::Create(RandomSegmentName(), kBytes);
    ASSERT_TRUE(created.ok()) << created.status();
    name = created->name();
    // Moving hands the name over: only the last owner unlinks it.
    SharedMemorySegment moved = std::move(*created);
    EXPECT_TRUE(SharedMemorySegment::Open(name, kBytes).ok());
  }
  EXPECT_EQ(SharedMemorySegment::Open(name, kBytes).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SharedMemoryTest, BadRequestsSayWhatIsWrong) {
  EXPECT_EQ(SharedMemorySegment::Create(created->name(), kBytes).status().code(),
            absl::StatusCode::kAlreadyExists);
  const absl::Status wrong_size =
      SharedMemorySegment::Open(created->name(), kBytes * 2).status();
  EXPECT_EQ(wrong_size.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(wrong_size.message(), created->name()))
      << wrong_size;
  EXPECT_EQ(SharedMemorySegment::Open(RandomSegmentName(), kBytes)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(SharedMemorySegment::Create(RandomSegmentName(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace chimera::worker
