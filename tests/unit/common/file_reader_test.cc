#include "common/file_reader.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::testing::HasSubstr;

TEST(LooksLikeTextTest, AcceptsAsciiAndUtf8) {
  EXPECT_TRUE(LooksLikeText("plain ascii\n"));
  EXPECT_TRUE(LooksLikeText("caf\xc3\xa9 \xe2\x82\xac"));
}

TEST(LooksLikeTextTest, RejectsNulAndInvalidUtf8) {
  EXPECT_FALSE(LooksLikeText(absl::string_view("a\0b", 3)));
  EXPECT_FALSE(LooksLikeText("\xff\xfe"));
  EXPECT_FALSE(LooksLikeText("\xc3\x28"));  // Bad continuation byte.
}

TEST(LooksLikeTextTest, AcceptsACharacterCutOffAtTheEnd) {
  EXPECT_TRUE(LooksLikeText("abc\xe2\x82"));
}

TEST(FileReaderTest, ReadsATextFile) {
  chimera::testing::TempDir dir;
  absl::StatusOr<std::string> text = ReadTextFile(dir.WriteFile("a.txt", "hi\n"), 100);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "hi\n");
}

TEST(FileReaderTest, MissingFileIsNotFound) {
  absl::StatusOr<std::string> text = ReadTextFile("/nonexistent/a.txt", 100);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(), HasSubstr("'/nonexistent/a.txt' does not exist"));
}

TEST(FileReaderTest, DirectoryIsRejected) {
  chimera::testing::TempDir dir;
  EXPECT_THAT(ReadTextFile(dir.path(), 100).status().message(), HasSubstr("a directory"));
}

TEST(FileReaderTest, FileOverTheLimitIsRejectedBeforeReading) {
  chimera::testing::TempDir dir;
  absl::StatusOr<std::string> text =
      ReadTextFile(dir.WriteFile("big.txt", std::string(101, 'x')), 100);
  EXPECT_THAT(text.status().message(), HasSubstr("101 bytes, more than the 100-byte limit"));
}

TEST(FileReaderTest, PrefixStopsAtTheLimit) {
  chimera::testing::TempDir dir;
  absl::StatusOr<std::string> head = ReadFilePrefix(dir.WriteFile("a", "abcdef"), 3);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(*head, "abc");
}

}  // namespace
}  // namespace chimera
