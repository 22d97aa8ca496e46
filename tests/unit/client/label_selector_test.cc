#include "client/label_selector.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::client {
namespace {

google::protobuf::Map<std::string, std::string> Labels(
    std::initializer_list<std::pair<const std::string, std::string>> pairs) {
  google::protobuf::Map<std::string, std::string> labels;
  for (const auto& [key, value] : pairs) labels[key] = value;
  return labels;
}

bool Selects(const std::string& selector,
             const google::protobuf::Map<std::string, std::string>& labels) {
  absl::StatusOr<LabelSelector> parsed = LabelSelector::Parse(selector);
  EXPECT_TRUE(parsed.ok()) << selector << ": " << parsed.status();
  return parsed.ok() && parsed->Matches(labels);
}

TEST(LabelSelectorTest, EveryRequirementMustHold) {
  const auto labels = Labels({{"team", "nlp"}, {"size", "large"}});
  EXPECT_TRUE(Selects("team=nlp", labels));
  EXPECT_TRUE(Selects("team==nlp", labels));
  EXPECT_TRUE(Selects("team=nlp, size=large", labels));
  EXPECT_FALSE(Selects("team=nlp,size=small", labels));
  EXPECT_TRUE(Selects("team!=vision", labels));
  EXPECT_FALSE(Selects("team!=nlp", labels));
  EXPECT_TRUE(Selects("owner!=bob", labels)) << "a missing label is not bob";
  EXPECT_TRUE(Selects("size", labels));
  EXPECT_FALSE(Selects("owner", labels));
  EXPECT_TRUE(Selects("!owner", labels));
  EXPECT_FALSE(Selects("!team", labels));
  EXPECT_FALSE(Selects("team=", labels));
  EXPECT_TRUE(Selects("team=", Labels({{"team", ""}})));
}

TEST(LabelSelectorTest, MalformedRequirementsAreNamed) {
  for (const char* bad : {"", "=nlp", "team nlp", "a,,b", "!", "te am=x"}) {
    absl::StatusOr<LabelSelector> parsed = LabelSelector::Parse(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_THAT(parsed.status().message(), ::testing::HasSubstr("-l: '"))
        << bad;
  }
}

}  // namespace
}  // namespace chimera::client
