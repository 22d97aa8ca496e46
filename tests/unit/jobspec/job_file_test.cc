// Job files as files: hostile or broken input gets an error, never a crash,
// and every shipped example is valid.
#include "jobspec/job_file.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/yaml_message.h"
#include "tests/support/temp_dir.h"

namespace chimera::jobspec {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

class JobFileTest : public ::testing::Test {
 protected:
  // The single error of loading `content` from a file; fails the test if
  // there is not exactly one.
  FieldError OnlyError(const std::string& content) {
    chimera::v1::TrainJob job;
    FieldErrors errors =
        LoadJobFile(dir_.WriteFile("job.yaml", content), {}, &job);
    EXPECT_THAT(errors.errors(), SizeIs(1)) << errors.ToStatus();
    return errors.empty() ? FieldError{} : errors.errors()[0];
  }

  chimera::testing::TempDir dir_;
};

TEST_F(JobFileTest, MissingFileSaysSo) {
  absl::StatusOr<chimera::v1::TrainJob> job =
      LoadJobFile(dir_.path() + "/absent.yaml");
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("does not exist"));
}

TEST_F(JobFileTest, EmptyFileIsAnError) {
  EXPECT_THAT(OnlyError("").message, HasSubstr("is empty"));
}

TEST_F(JobFileTest, BinaryFileIsAnError) {
  std::string binary(4096, '\0');
  for (size_t i = 0; i < binary.size(); i += 3) binary[i] = '\xff';
  EXPECT_THAT(OnlyError(binary).message, HasSubstr("not a text file"));
}

TEST_F(JobFileTest, FileOverTheSizeLimitIsAnError) {
  std::string huge = "apiVersion: chimera.dev/v1alpha1\n# ";
  huge.append(kMaxYamlFileBytes, 'x');
  EXPECT_THAT(OnlyError(huge).message, HasSubstr("-byte limit"));
}

TEST_F(JobFileTest, SyntaxErrorNamesTheLine) {
  FieldError error = OnlyError("apiVersion: v1\nkind: [TrainJob\nspec: {}\n");
  EXPECT_EQ(error.path, "");
  EXPECT_THAT(error.message, HasSubstr("not valid YAML: line"));
}

TEST_F(JobFileTest, BillionLaughsBombIsRejectedWithoutExpanding) {
  // Nine levels of nine-fold aliases would expand to 9^9 (387 million)
  // strings under `spec`; the walk must stop long before that.
  std::string bomb = "apiVersion: chimera.dev/v1alpha1\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level < 9; ++level) {
    absl::StrAppend(&bomb, "l", level, ": &l", level, " [");
    for (int i = 0; i < 9; ++i) absl::StrAppend(&bomb, i ? ", " : "", "*l", level - 1);
    absl::StrAppend(&bomb, "]\n");
  }
  absl::StrAppend(&bomb, "spec: {model: {family: *l8}}\n");
  chimera::v1::TrainJob job;
  FieldErrors errors = LoadJobFile(dir_.WriteFile("bomb.yaml", bomb), {}, &job);
  ASSERT_FALSE(errors.empty());
  EXPECT_LE(errors.size(), 10u) << errors.ToStatus();
  EXPECT_THAT(errors.ToStatus().message(), HasSubstr("spec.model.family: expected a string, got a list"));
}

TEST_F(JobFileTest, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  FieldError error = OnlyError(absl::StrCat("metadata: ", deep, "\n"));
  EXPECT_FALSE(error.message.empty());
}

TEST_F(JobFileTest, NestingBeyondTheDepthLimitIsReported) {
  std::string nested = "x";
  for (int i = 0; i < kMaxYamlDepth + 5; ++i) nested = absl::StrCat("{a: ", nested, "}");
  FieldError error = OnlyError(absl::StrCat("metadata: {labels: ", nested, "}\n"));
  EXPECT_EQ(error.path, "metadata.labels.a");
  EXPECT_THAT(error.message, HasSubstr("expected a string"));
}

TEST_F(JobFileTest, SeveralDocumentsAreAnError) {
  EXPECT_THAT(OnlyError("kind: TrainJob\n---\nkind: TrainJob\n").message,
              HasSubstr("expected one YAML document, found more than one"));
}

TEST_F(JobFileTest, TopLevelListIsAnError) {
  EXPECT_THAT(OnlyError("- a\n- b\n").message,
              HasSubstr("expected a mapping of TrainJob fields"));
}

// Examples name their data relative to the repository root, as a user runs
// them from a checkout.
TEST(ExampleJobsTest, EveryShippedExampleIsValid) {
  const std::filesystem::path root = CHIMERA_SOURCE_DIR;
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(root);
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root / "examples")) {
    if (entry.path().extension() != ".yaml") continue;
    chimera::v1::TrainJob job;
    FieldErrors errors = LoadJobFile(entry.path().string(), {}, &job);
    EXPECT_TRUE(errors.empty()) << entry.path() << ":\n" << errors.ToStatus();
    ++examples;
  }
  std::filesystem::current_path(previous);
  EXPECT_GE(examples, 7) << "one example per scheme family";
}

TEST(ExampleJobsTest, SummaryNamesModelScheduleAndBatch) {
  chimera::v1::TrainJob job;
  job.mutable_metadata()->set_name("tiny");
  auto* spec = job.mutable_spec();
  spec->mutable_model()->set_family("gpt");
  spec->mutable_model()->set_num_layers(8);
  spec->mutable_model()->set_hidden_size(128);
  spec->mutable_parallelism()->set_schedule("chimera");
  spec->mutable_parallelism()->set_pipeline(4);
  spec->mutable_resources()->set_workers(4);
  spec->mutable_training()->set_global_batch_size(32);
  spec->mutable_training()->set_max_steps(50);
  EXPECT_EQ(SummarizeJob(job),
            "tiny: gpt 8 layers x 128 hidden, chimera D=4 W=auto, 4 cpu "
            "workers, batch 32, 50 steps");
  spec->mutable_resources()->clear_workers();
  EXPECT_EQ(SummarizeJob(job),
            "tiny: gpt 8 layers x 128 hidden, chimera D=4 W=auto, auto cpu "
            "workers, batch 32, 50 steps");
}

}  // namespace
}  // namespace chimera::jobspec
