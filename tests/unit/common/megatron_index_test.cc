#include "common/megatron_index.h"

#include <fcntl.h>

#include <string>

#include "common/unique_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/megatron_dataset.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::chimera::testing::AppendLittleEndian;
using ::chimera::testing::MegatronDataset;
using ::testing::HasSubstr;

const MegatronDataset kThreeDocuments{.documents = {{1, 2, 3}, {}, {4, 5}}};

// The index's bytes with `count` bytes from `offset` replaced by `value`.
std::string Patched(std::string index, size_t offset, uint64_t value,
                    int count) {
  std::string bytes;
  AppendLittleEndian(bytes, value, count);
  return index.replace(offset, count, bytes);
}

// Where the arrays of kThreeDocuments' index start.
constexpr size_t kDtypeAt = 17;
constexpr size_t kLengthsAt = 34;
constexpr size_t kOffsetsAt = kLengthsAt + 3 * 4;
constexpr size_t kBoundariesAt = kOffsetsAt + 3 * 8;

TEST(MegatronIndexTest, ReadsCountsAndTheTokenType) {
  const absl::StatusOr<MegatronIndex> index =
      ParseMegatronIndex(kThreeDocuments.IndexBytes());
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->sequences, 3);
  EXPECT_EQ(index->documents, 3);
  EXPECT_EQ(index->tokens, 5);
  EXPECT_EQ(index->token_bytes, 2);
  EXPECT_FALSE(index->signed_tokens);
  EXPECT_EQ(index->dtype, "uint16");
  EXPECT_TRUE(CheckMegatronData(*index, 10).ok());
}

TEST(MegatronIndexTest, KnowsEveryIntegerTypeMegatronWrites) {
  for (const auto& [code, bytes, is_signed] :
       {std::make_tuple(1, 1, false), std::make_tuple(2, 1, true),
        std::make_tuple(3, 2, true), std::make_tuple(4, 4, true),
        std::make_tuple(5, 8, true), std::make_tuple(8, 2, false)}) {
    MegatronDataset dataset = kThreeDocuments;
    dataset.dtype_code = static_cast<uint8_t>(code);
    const absl::StatusOr<MegatronIndex> index =
        ParseMegatronIndex(dataset.IndexBytes());
    ASSERT_TRUE(index.ok()) << code << ": " << index.status();
    EXPECT_EQ(index->token_bytes, bytes) << code;
    EXPECT_EQ(index->signed_tokens, is_signed) << code;
    EXPECT_TRUE(CheckMegatronData(*index, dataset.DataBytes().size()).ok());
  }
}

TEST(MegatronIndexTest, AnEmptyDatasetHasOneBoundary) {
  const absl::StatusOr<MegatronIndex> index =
      ParseMegatronIndex(MegatronDataset{}.IndexBytes());
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->tokens, 0);
}

void ExpectRefused(const std::string& bytes, const std::string& reason) {
  const absl::StatusOr<MegatronIndex> index = ParseMegatronIndex(bytes);
  EXPECT_EQ(index.status().code(), absl::StatusCode::kInvalidArgument)
      << reason;
  EXPECT_THAT(index.status().message(), HasSubstr(reason));
}

TEST(MegatronIndexTest, RefusesAnotherFileOrVersion) {
  ExpectRefused("", "index magic");
  ExpectRefused(
      "MMIDIDX\0\0"
      "abc",
      "index magic");
  ExpectRefused(kThreeDocuments.IndexBytes().substr(0, 12),
                "ends at byte 12, inside the version");
  ExpectRefused(Patched(kThreeDocuments.IndexBytes(), 9, 2, 8),
                "has version 2; only version 1");
}

TEST(MegatronIndexTest, RefusesFloatAndUnknownTypes) {
  ExpectRefused(Patched(kThreeDocuments.IndexBytes(), kDtypeAt, 7, 1),
                "dtype code 7 (float32); token ids must be integers");
  ExpectRefused(Patched(kThreeDocuments.IndexBytes(), kDtypeAt, 9, 1),
                "dtype code 9; Megatron's codes are 1 to 8");
}

TEST(MegatronIndexTest, RefusesTruncatedOrPaddedIndexes) {
  const std::string index = kThreeDocuments.IndexBytes();
  ExpectRefused(index.substr(0, index.size() - 1),
                "counts 3 sequences and 4 document boundaries, more than");
  ExpectRefused(index + "x", "has 1 bytes after its document boundaries");
  // A count near 2^64 must not overflow the size check.
  ExpectRefused(Patched(index, kDtypeAt + 1, ~uint64_t{0}, 8),
                "18446744073709551615 sequences");
  ExpectRefused(Patched(index, kDtypeAt + 9, uint64_t{1} << 61, 8),
                "2305843009213693952 document boundaries");
}

TEST(MegatronIndexTest, RefusesSequencesThatDoNotFollowOneAnother) {
  const std::string index = kThreeDocuments.IndexBytes();
  ExpectRefused(Patched(index, kLengthsAt, 0x80000000, 4),
                "gives sequence 0 a length of -2147483648");
  ExpectRefused(Patched(index, kOffsetsAt + 8, 4, 8),
                "puts sequence 1 at byte 4 of the data; the sequences before "
                "it end at byte 6");
  ExpectRefused(Patched(index, kOffsetsAt, ~uint64_t{0}, 8),
                "puts sequence 0 at byte -1");
}

TEST(MegatronIndexTest, RefusesBoundariesOutOfOrder) {
  const std::string index = kThreeDocuments.IndexBytes();
  ExpectRefused(Patched(index, kBoundariesAt, 1, 8),
                "document boundary 0 at sequence 1");
  ExpectRefused(Patched(index, kBoundariesAt + 3 * 8, 2, 8),
                "document boundary 3 at sequence 2");
  ExpectRefused(Patched(index, kBoundariesAt + 8, 3, 8),
                "document boundary 2 at sequence 2");
  std::string no_boundaries = index.substr(0, kBoundariesAt);
  ExpectRefused(Patched(no_boundaries, kDtypeAt + 9, 0, 8),
                "has no document boundaries");
}

TEST(MegatronIndexTest, DataOfAnotherSizeIsRefused) {
  const MegatronIndex index =
      ParseMegatronIndex(kThreeDocuments.IndexBytes()).value();
  const absl::Status short_data = CheckMegatronData(index, 8);
  EXPECT_EQ(short_data.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      short_data.message(),
      HasSubstr("is 8 bytes; its index describes 5 uint16 tokens, 10 bytes"));
}

TEST(MegatronIndexTest, ReadsAnOpenFile) {
  const chimera::testing::TempDir dir;
  kThreeDocuments.Write(dir.path() + "/corpus");
  UniqueFd fd(::open(MegatronIndexPath(dir.path() + "/corpus").c_str(),
                     O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  const absl::StatusOr<MegatronIndex> index = ReadMegatronIndex(fd.get());
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->tokens, 5);
  UniqueFd directory(::open(dir.path().c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_THAT(ReadMegatronIndex(directory.get()).status().message(),
              HasSubstr("not a regular file"));
  UniqueFd empty(
      ::open(dir.WriteFile("empty.idx", "").c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_THAT(ReadMegatronIndex(empty.get()).status().message(),
              HasSubstr("index magic"));
}

TEST(MegatronIndexTest, NamesItsFilesByThePrefix) {
  EXPECT_EQ(MegatronIndexPath("data/corpus_text_document"),
            "data/corpus_text_document.idx");
  EXPECT_EQ(MegatronDataPath("data/corpus_text_document"),
            "data/corpus_text_document.bin");
}

}  // namespace
}  // namespace chimera
