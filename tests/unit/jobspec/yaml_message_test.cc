#include "jobspec/yaml_message.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "chimera/v1/profile.pb.h"
#include "chimera/v1/service.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::jobspec {
namespace {

using ::testing::HasSubstr;

TEST(YamlMessageTest, ParsesNestedMessagesListsMapsAndEnums) {
  chimera::v1::Job job;
  FieldErrors errors = ParseYamlMessage(R"(
id: job-1
manifest:
  metadata: {name: a, labels: {team: infra}}
status: {state: JOB_STATE_RUNNING, completedSteps: 3}
plan:
  scheme: chimera
  recompute: true
  partition:
    - {stage: 0, firstLayer: 0, numLayers: 4}
    - {stage: 1, firstLayer: 4, numLayers: 4}
)",
                                        &job);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  EXPECT_EQ(job.manifest().metadata().labels().at("team"), "infra");
  EXPECT_EQ(job.status().state(), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job.status().completed_steps(), 3);
  EXPECT_TRUE(job.plan().recompute());
  ASSERT_EQ(job.plan().partition_size(), 2);
  EXPECT_EQ(job.plan().partition(1).first_layer(), 4);
}

TEST(YamlMessageTest, ErrorsInListElementsNameTheIndex) {
  chimera::v1::Plan plan;
  FieldErrors errors =
      ParseYamlMessage("partition:\n  - {stage: 0}\n  - {stage: one}\n", &plan);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors.errors()[0].path, "partition[1].stage");
}

TEST(YamlMessageTest, UnknownEnumValueListsTheValues) {
  chimera::v1::JobStatus status;
  FieldErrors errors = ParseYamlMessage("state: DONE\n", &status);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors.errors()[0].path, "state");
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("JOB_STATE_SUCCEEDED"));
}

// Found by the job-file fuzzer: these ended the process (an exception
// nlohmann throws when writing a string that is not UTF-8).
TEST(YamlMessageTest, StringsThatAreNotUtf8AreRefused) {
  for (const std::string yaml : {"metadata: {name: \"a\xff\"}\n", "kind: \"x\xc3\""}) {
    chimera::v1::TrainJob job;
    FieldErrors errors = ParseYamlMessage(yaml, &job);
    ASSERT_EQ(errors.size(), 1u) << yaml;
    EXPECT_THAT(errors.errors()[0].message, HasSubstr("not valid UTF-8"));
  }
}

// Found by the profile fuzzer: yaml-cpp never returned from this text.
TEST(YamlMessageTest, ControlCharactersAreRefusedNamingWhere) {
  chimera::v1::ModelProfile profile;
  FieldErrors errors = ParseYamlMessage(
      ",piVersion: ciim\x1c" "eon:0\x18\x18\x18\x18\x18\x18\x18\x18\x18\x18\x18"
      "7\x18\x18\x18\x18\x18" "al0.p",
      &profile);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("line 1, column 17: control character 0x1c is not allowed"));
  EXPECT_TRUE(ParseYamlMessage("kind: a\tb\r\n", &profile).empty()) << "tab and CR are";
}

// Found by the cluster fuzzer: yaml-cpp's LoadAll never returned from ",".
TEST(YamlMessageTest, ADocumentBeginningWithACommaIsRefusedNotLoopedOn) {
  chimera::v1::Plan plan;
  for (const std::string yaml : {",", "# comment\n ,a"}) {
    FieldErrors errors = ParseYamlMessage(yaml, &plan);
    ASSERT_EQ(errors.size(), 1u) << yaml;
    EXPECT_THAT(errors.errors()[0].message, HasSubstr("cannot begin with ','")) << yaml;
  }
  FieldErrors two = ParseYamlMessage("scheme: gpipe\n---\nscheme: 1f1b\n", &plan);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_THAT(two.errors()[0].message,
              HasSubstr("expected one YAML document, found more than one"));
  FieldErrors none = ParseYamlMessage("", &plan);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_THAT(none.errors()[0].message, HasSubstr("found none"));
}

TEST(YamlMessageTest, BooleansAreStrict) {
  chimera::v1::Plan plan;
  FieldErrors errors = ParseYamlMessage("recompute: yes\n", &plan);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("expected true or false"));
}

TEST(YamlMessageTest, NullValueLeavesTheFieldUnset) {
  chimera::v1::Plan plan;
  FieldErrors errors = ParseYamlMessage("scheme:\nwidth: 2\n", &plan);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  EXPECT_EQ(plan.scheme(), "");
  EXPECT_EQ(plan.width(), 2);
}

TEST(YamlMessageTest, UnsignedFieldRejectsNegativeNumbers) {
  chimera::v1::RegisterWorkerRequest request;
  FieldErrors errors = ParseYamlMessage("incarnation: -5\n", &request);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors.errors()[0].path, "incarnation");
}

// Protobuf's JSON mapping writes 64-bit integers as strings; 32-bit ones
// stay plain numbers, so a quoted one is still a mistake.
TEST(YamlMessageTest, QuotedIntegersAreAcceptedFor64BitFieldsOnly) {
  chimera::v1::RegisterWorkerRequest request;
  FieldErrors errors = ParseYamlMessage(
      "incarnation: \"18446744073709551615\"\nmemoryBytes: '1024'\n", &request);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  EXPECT_EQ(request.incarnation(), 18446744073709551615u);
  EXPECT_EQ(request.memory_bytes(), 1024);

  chimera::v1::Plan plan;
  errors = ParseYamlMessage("width: '2'\n", &plan);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("got string '2'"));
  request.Clear();
  errors = ParseYamlMessage("memoryBytes: 'lots'\n", &request);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors.errors()[0].path, "memoryBytes");
}

// Aliases that repeat a list of mappings of lists: the text is small but
// the tree it describes is not.
TEST(YamlMessageTest, AliasExpansionStopsAtTheNodeBudget) {
  std::string yaml = "p: &p {stage: 1, firstLayer: 2, numLayers: 3}\n";
  absl::StrAppend(&yaml, "l0: &l0 [*p, *p, *p, *p, *p, *p, *p, *p, *p, *p]\n");
  absl::StrAppend(&yaml, "jobs:\n");
  // 1000 jobs x 10 partitions x 4 nodes = 40000 nodes per alias level below.
  std::string plan = "  - {plan: {partition: *l0}}\n";
  for (int i = 0; i < 5000; ++i) yaml += plan;
  chimera::v1::ListJobsResponse response;
  FieldErrors errors = ParseYamlMessage(yaml, &response);
  ASSERT_FALSE(errors.empty());
  EXPECT_THAT(errors.ToStatus().message(), HasSubstr("expands to more than"));
}

TEST(YamlMessageTest, ErrorFloodIsCapped) {
  std::string yaml = "partition:\n";
  for (int i = 0; i < 1000; ++i) yaml += "  - {stage: x}\n";
  chimera::v1::Plan plan;
  FieldErrors errors = ParseYamlMessage(yaml, &plan);
  EXPECT_LE(errors.size(), static_cast<size_t>(kMaxYamlErrors + 1));
  EXPECT_THAT(errors.errors().back().message,
              HasSubstr("the rest is not checked"));
}

}  // namespace
}  // namespace chimera::jobspec
