#include "worker/comm/shared_memory.h"

#include <gtest/gtest.h>

#include <cstring>

#include "absl/strings/match.h"

namespace chimera::worker {
namespace {

constexpr size_t kBytes = 1 << 16;

TEST(SharedMemoryTest, ASegmentOpenedByNameSharesItsBytes) {
  absl::StatusOr<SharedMemorySegment> created =
      SharedMemorySegment::Create(RandomSegmentName(), kBytes);
  ASSERT_TRUE(created.ok()) << created.status();
  absl::StatusOr<SharedMemorySegment> opened =
      SharedMemorySegment::Open(created->name(), kBytes);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_NE(created->data(), opened->data());
  std::memcpy(created->data(), "chimera", 8);
  EXPECT_STREQ(static_cast<const char*>(opened->data()), "chimera");
  EXPECT_EQ(static_cast<const char*>(opened->data())[kBytes - 1], 0)
      << "a new segment is zero-filled";
}

TEST(SharedMemoryTest, AnUnlinkedNameIsGoneButItsMappingsStay) {
  absl::StatusOr<SharedMemorySegment> created =
      SharedMemorySegment::Create(RandomSegmentName(), kBytes);
  ASSERT_TRUE(created.ok()) << created.status();
  absl::StatusOr<SharedMemorySegment> opened =
      SharedMemorySegment::Open(created->name(), kBytes);
  ASSERT_TRUE(opened.ok()) << opened.status();
  created->Unlink();
  EXPECT_EQ(SharedMemorySegment::Open(created->name(), kBytes).status().code(),
            absl::StatusCode::kNotFound);
  static_cast<char*>(created->data())[7] = 42;
  EXPECT_EQ(static_cast<const char*>(opened->data())[7], 42);
}

TEST(SharedMemoryTest, TheCreatorsSegmentIsUnlinkedWhenItGoes) {
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

TEST(SharedMemoryTest, BadRequestsSayWhatIsWrong) {
  absl::StatusOr<SharedMemorySegment> created =
      SharedMemorySegment::Create(RandomSegmentName(), kBytes);
  ASSERT_TRUE(created.ok()) << created.status();
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
