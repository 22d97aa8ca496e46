#include "common/utf8.h"

#include "common/file_reader.h"
#include "gtest/gtest.h"

namespace chimera {
namespace {

TEST(Utf8PrefixTest, TextThatFitsIsKeptWhole) {
  EXPECT_EQ(Utf8Prefix("caf\xc3\xa9", 5), "caf\xc3\xa9");
  EXPECT_EQ(Utf8Prefix("", 0), "");
}

TEST(Utf8PrefixTest, AsciiIsCutAtTheBudget) {
  EXPECT_EQ(Utf8Prefix("abcdef", 4), "abcd");
}

TEST(Utf8PrefixTest, NeverEndsInsideAMultiByteCharacter) {
  // "€" is three bytes: a budget that ends in its middle drops it whole.
  const std::string euros = "\xe2\x82\xac\xe2\x82\xac";
  EXPECT_EQ(Utf8Prefix(euros, 3), "\xe2\x82\xac");
  EXPECT_EQ(Utf8Prefix(euros, 4), "\xe2\x82\xac");
  EXPECT_EQ(Utf8Prefix(euros, 5), "\xe2\x82\xac");
  EXPECT_EQ(Utf8Prefix(euros, 2), "");
  for (size_t budget = 0; budget <= euros.size(); ++budget) {
    EXPECT_TRUE(LooksLikeText(std::string(Utf8Prefix(euros, budget)) + "x"))
        << budget;
  }
}

}  // namespace
}  // namespace chimera
