#include "common/spelling.h"

#include <gtest/gtest.h>

namespace chimera {
namespace {

const std::vector<std::string> kModelFields = {
    "family", "numLayers", "hiddenSize", "numHeads", "seqLength", "dtype"};

TEST(SpellingTest, SuggestsTheCandidateAFewEditsAway) {
  EXPECT_EQ(ClosestSpelling("numLayer", kModelFields), "numLayers");
  EXPECT_EQ(ClosestSpelling("hidenSize", kModelFields), "hiddenSize");
  EXPECT_EQ(ClosestSpelling("SEQLENGTH", kModelFields), "seqLength");
  EXPECT_EQ(ClosestSpelling("sumbit", {"submit", "status", "stop"}), "submit");
}

TEST(SpellingTest, SuggestsNothingForAFarWordOrATie) {
  EXPECT_EQ(ClosestSpelling("optimizer", kModelFields), std::nullopt);
  EXPECT_EQ(ClosestSpelling("xyz", kModelFields), std::nullopt);
  EXPECT_EQ(ClosestSpelling("stap", {"stop", "step"}), std::nullopt);
  EXPECT_EQ(ClosestSpelling("anything", {}), std::nullopt);
}

}  // namespace
}  // namespace chimera
