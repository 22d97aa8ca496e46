// Each case changes one thing in a valid job file and asserts the exact field
// path (and the gist of the message) of every error it causes.
#include "jobspec/job_validator.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_file.h"
#include "tests/support/megatron_dataset.h"
#include "tests/support/temp_dir.h"

namespace chimera::jobspec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kValidJob[] = R"(apiVersion: chimera.dev/v1alpha1
kind: TrainJob
metadata:
  name: test-job
spec:
  model:
    family: gpt
    numLayers: 8
    hiddenSize: 64
    numHeads: 4
    seqLength: 16
  data:
    format: text
    path: DATA_PATH
  training:
    globalBatchSize: 16
    microBatchSize: 2
    maxSteps: 10
    optimizer:
      name: adamw
      lr: 0.001
  parallelism:
    schedule: chimera
    pipeline: 4
    data: 2
    microBatches: 4
  resources:
    workers: 8
    device: cpu
)";

std::vector<std::string> Paths(const FieldErrors& errors) {
  std::vector<std::string> paths;
  for (const FieldError& error : errors.errors()) paths.push_back(error.path);
  return paths;
}

class JobValidatorTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_.WriteFile(text_path_, std::string(1000, 'a')); }

  // The valid job with `from` replaced by `to` (which must occur).
  std::string JobWith(const std::string& from, const std::string& to) {
    std::string yaml = absl::StrReplaceAll(kValidJob, {{"DATA_PATH", text_path_}});
    EXPECT_NE(yaml.find(from), std::string::npos) << from;
    return absl::StrReplaceAll(yaml, {{from, to}});
  }

  FieldErrors Validate(const std::string& yaml) {
    chimera::v1::TrainJob job;
    return ParseJob(yaml, Options(), &job);
  }

  // Data paths are relative to the test's directory, as the workers' are to
  // their data root.
  ValidationOptions Options() const {
    return {.check_data_files = true, .data_root = dir_.path()};
  }

  chimera::testing::TempDir dir_;
  const std::string text_path_ = "corpus.txt";
};

TEST_F(JobValidatorTest, ValidJobHasNoErrors) {
  EXPECT_THAT(Paths(Validate(JobWith("gpt", "gpt"))), IsEmpty());
}

struct EditCase {
  std::string name;
  std::string from;
  std::string to;
  std::string path;
  std::string message;
};

void PrintTo(const EditCase& edit, std::ostream* os) { *os << edit.name; }

class JobValidatorEditTest : public JobValidatorTest,
                             public ::testing::WithParamInterface<EditCase> {};

TEST_P(JobValidatorEditTest, ReportsExactlyTheEditedField) {
  const EditCase& edit = GetParam();
  FieldErrors errors = Validate(JobWith(edit.from, edit.to));
  ASSERT_THAT(Paths(errors), ElementsAre(edit.path)) << errors.ToStatus();
  EXPECT_THAT(errors.errors()[0].message, HasSubstr(edit.message));
}

INSTANTIATE_TEST_SUITE_P(
    Edits, JobValidatorEditTest,
    ::testing::Values(
        EditCase{"UnknownField", "numLayers: 8",
                 "numLayers: 8\n    numLayer: 8", "spec.model.numLayer",
                 "unknown field"},
        EditCase{"MisspelledNameSuggestsTheField", "hiddenSize: 64",
                 "hidenSize: 64", "spec.model.hidenSize",
                 "unknown field; did you mean 'hiddenSize'?"},
        EditCase{"FarOffNameListsTheFields", "numLayers: 8",
                 "numLayers: 8\n    optimizer: adam", "spec.model.optimizer",
                 "ModelSpec has family"},
        EditCase{"SnakeCaseNameSuggestsCamelCase", "numLayers: 8",
                 "num_layers: 8", "spec.model.num_layers",
                 "did you mean 'numLayers'"},
        EditCase{"WordWhereIntegerExpected", "numLayers: 8", "numLayers: eight",
                 "spec.model.numLayers", "expected an integer"},
        EditCase{"QuotedNumberIsAString", "numLayers: 8", "numLayers: \"8\"",
                 "spec.model.numLayers", "got string '8'"},
        EditCase{"IntegerBeyond32Bits", "numLayers: 8",
                 "numLayers: 99999999999", "spec.model.numLayers",
                 "32-bit range"},
        EditCase{"ListWhereMappingExpected",
                 "optimizer:\n      name: adamw\n      lr: 0.001",
                 "optimizer: [adamw]", "spec.training.optimizer",
                 "expected a mapping"},
        EditCase{"KeyValueHeadsOutsideLlama", "numHeads: 4",
                 "numHeads: 4\n    numKvHeads: 2", "spec.model.numKvHeads",
                 "is for family 'llama' only"},
        EditCase{"RopeThetaOutsideLlama", "numHeads: 4",
                 "numHeads: 4\n    ropeTheta: 10000", "spec.model.ropeTheta",
                 "is for family 'llama' only"},
        EditCase{"TiedEmbeddingsInBert", "family: gpt",
                 "family: bert\n    tieEmbeddings: true",
                 "spec.model.tieEmbeddings",
                 "is for families 'gpt' and 'llama' only"},
        EditCase{"TiedEmbeddingsNotABoolean", "numHeads: 4",
                 "numHeads: 4\n    tieEmbeddings: yes please",
                 "spec.model.tieEmbeddings", "expected true or false"},
        EditCase{"RopeScalingOutsideLlama", "numHeads: 4",
                 "numHeads: 4\n    ropeScaling: {factor: 8}",
                 "spec.model.ropeScaling", "is for family 'llama' only"},
        EditCase{"RopeScalingFactorBelowOne", "family: gpt",
                 "family: llama\n    ropeScaling: {lowFreqFactor: 1}",
                 "spec.model.ropeScaling.factor",
                 "0 must be >= 1 (1 turns the scaling off)"},
        EditCase{"RopeScalingWithoutABand", "family: gpt",
                 "family: llama\n    ropeScaling: {factor: 8, "
                 "lowFreqFactor: 4}",
                 "spec.model.ropeScaling.highFreqFactor",
                 "4 must be above lowFreqFactor (4); 0 means 4"},
        EditCase{"RopeScalingMisspelledField", "family: gpt",
                 "family: llama\n    ropeScaling: {factor: 8, lowFreq: 1}",
                 "spec.model.ropeScaling.lowFreq", "lowFreqFactor"},
        EditCase{"KeyValueHeadsNotDividingTheHeads", "family: gpt",
                 "family: llama\n    numKvHeads: 3", "spec.model.numKvHeads",
                 "3 does not divide numHeads (4)"},
        EditCase{"LlamaHeadsOfAnOddSize",
                 "family: gpt\n    numLayers: 8\n    hiddenSize: 64",
                 "family: llama\n    numLayers: 8\n    hiddenSize: 60",
                 "spec.model.numHeads", "gives heads of 15 dimensions"},
        EditCase{"RopeThetaOfOne", "family: gpt",
                 "family: llama\n    ropeTheta: 1", "spec.model.ropeTheta",
                 "1 must be > 1"},
        EditCase{"InitFromUntiedGpt", "numHeads: 4",
                 "numHeads: 4\n    initFrom: hf", "spec.model.initFrom",
                 "'gpt' with tieEmbeddings: true"},
        EditCase{"InitFromAbsolute", "family: gpt",
                 "family: llama\n    initFrom: /hf", "spec.model.initFrom",
                 "absolute"},
        EditCase{"TorchScriptWithoutModules", "family: gpt",
                 "family: torchscript", "spec.model.modules",
                 "is required for family 'torchscript'"},
        EditCase{"ModulesOfAGpt", "numHeads: 4",
                 "numHeads: 4\n    modules: model", "spec.model.modules",
                 "is for family 'torchscript' only"},
        EditCase{"ModulesOutsideTheDataRoot", "family: gpt",
                 "family: torchscript\n    modules: ../model",
                 "spec.model.modules", ".."},
        EditCase{"MisspelledPreset", "family: gpt", "preset: llama3-8",
                 "spec.model.preset",
                 "'llama3-8' is not a preset; did you mean 'llama3-8b'?"},
        EditCase{"UnknownPreset", "family: gpt", "preset: falcon",
                 "spec.model.preset",
                 "'falcon' is not a preset (presets: gpt2, gpt2-medium, "},
        EditCase{"PresetOfAnotherFamily", "family: gpt",
                 "family: gpt\n    preset: llama3-8b", "spec.model.family",
                 "'gpt' contradicts preset 'llama3-8b', a llama model"},
        EditCase{"ZeroLayers", "numLayers: 8", "numLayers: 0",
                 "spec.model.numLayers", "required"},
        EditCase{"NegativeHiddenSize", "hiddenSize: 64", "hiddenSize: -64",
                 "spec.model.hiddenSize", "-64 must be >= 1"},
        EditCase{"HiddenSizeNotDivisibleByHeads", "hiddenSize: 64",
                 "hiddenSize: 66", "spec.model.hiddenSize",
                 "not divisible by numHeads (4)"},
        EditCase{"UnknownModelFamily", "family: gpt", "family: lstm",
                 "spec.model.family", "'lstm' is not one of gpt, bert"},
        EditCase{"Bfloat16OnCpu", "seqLength: 16",
                 "seqLength: 16\n    dtype: bfloat16", "spec.model.dtype",
                 "needs resources.device 'gpu'"},
        EditCase{"GlobalBatchCannotBeMade", "globalBatchSize: 16",
                 "globalBatchSize: 24", "spec.training.globalBatchSize",
                 "data (2) x microBatchSize (2) x microBatches (4) = 16"},
        EditCase{"ChimeraPipelinesMustDivideHalfDepth", "microBatches: 4",
                 "microBatches: 4\n    pipelines: 6",
                 "spec.parallelism.pipelines", "f = 3 to divide D/2 = 2"},
        EditCase{"MoreStagesThanLayers", "numLayers: 8", "numLayers: 3",
                 "spec.parallelism.pipeline", "numLayers is 3"},
        EditCase{"UnknownSchedule", "schedule: chimera", "schedule: zigzag",
                 "spec.parallelism.schedule", "1f1b, gems, chimera"},
        EditCase{"AsynchronousScheduleNeedsConsent",
                 "schedule: chimera\n    pipeline: 4\n    data: 2\n"
                 "    microBatches: 4",
                 "schedule: pipedream-2bw\n    pipeline: 8\n    data: 1\n"
                 "    microBatches: 8",
                 "spec.parallelism.schedule",
                 "'pipedream-2bw' is asynchronous: its micro-batches run on "
                 "weights one update old"},
        EditCase{"PipeDreamNeedsConsent",
                 "schedule: chimera\n    pipeline: 4\n    data: 2\n"
                 "    microBatches: 4",
                 "schedule: pipedream\n    pipeline: 8\n    data: 1\n"
                 "    microBatches: 8",
                 "spec.parallelism.schedule",
                 "'pipedream' is asynchronous: its micro-batches run on "
                 "weights a few updates old"},
        EditCase{"ReplicationWithAZero",
                 "schedule: chimera\n    pipeline: 4\n    data: 2\n",
                 "schedule: 1f1b\n    replication: \"2:0\"\n    data: 2\n",
                 "spec.parallelism.replication",
                 "'0' must be a number of workers in [1, 32768]"},
        EditCase{"ReplicationThatDoesNotSplitTheMicroBatch",
                 "schedule: chimera\n    pipeline: 4\n    data: 2\n",
                 "schedule: 1f1b\n    replication: \"3:1\"\n    data: 2\n",
                 "spec.training.microBatchSize",
                 "2 does not split into the 3 slices of replication 3:1"},
        EditCase{"ReplicationOfAnotherScheme", "microBatches: 4",
                 "microBatches: 4\n    replication: \"1:1:1:1\"",
                 "spec.parallelism.replication",
                 "only applies to schedule gpipe or 1f1b"},
        EditCase{"ReplicationOfAnotherDepth",
                 "schedule: chimera\n    pipeline: 4\n",
                 "schedule: 1f1b\n    pipeline: 4\n    replication: \"2:2\"\n",
                 "spec.parallelism.replication",
                 "2:2 names 2 stages, but the pipeline has 4"},
        EditCase{
            "WorkersDoNotMatchTheReplication",
            "schedule: chimera\n    pipeline: 4\n    data: 2\n",
            "schedule: 1f1b\n    replication: \"2:1\"\n    data: 2\n",
            "spec.resources.workers",
            "8 must equal data (2) x the 3 workers of replication 2:1 = 6"},
        EditCase{"PolicyOfAnotherScheme", "microBatches: 4",
                 "microBatches: 4\n    policy: pa", "spec.parallelism.policy",
                 "only applies to schedule 1f1b"},
        EditCase{"UnknownConcatenation", "microBatches: 4",
                 "microBatches: 4\n    concat: sideways",
                 "spec.parallelism.concat", "direct, forward-doubling"},
        EditCase{"WorkersDoNotMatchDataTimesPipeline", "workers: 8",
                 "workers: 6", "spec.resources.workers",
                 "data (2) x pipeline (4) = 8"},
        EditCase{"NegativeWorkers", "workers: 8", "workers: -1",
                 "spec.resources.workers", "must be >= 0"},
        EditCase{"UnknownDevice", "device: cpu", "device: tpu",
                 "spec.resources.device", "'tpu' is not one of cpu, gpu"},
        EditCase{"WrongApiVersion", "chimera.dev/v1alpha1", "chimera.dev/v2",
                 "apiVersion", "must be 'chimera.dev/v1alpha1'"},
        EditCase{"WrongKind", "kind: TrainJob", "kind: Job", "kind",
                 "must be 'TrainJob'"},
        EditCase{"NameIsNotADnsLabel", "name: test-job", "name: Test_Job",
                 "metadata.name", "lower-case"},
        EditCase{"UnknownOptimizer", "name: adamw", "name: lion",
                 "spec.training.optimizer.name", "sgd, adamw"},
        EditCase{"NonPositiveLearningRate", "lr: 0.001", "lr: 0",
                 "spec.training.optimizer.lr", "must be > 0"},
        EditCase{"MomentumOutsideUnitInterval", "lr: 0.001",
                 "lr: 0.001\n      momentum: 1.5",
                 "spec.training.optimizer.momentum", "[0, 1)"},
        EditCase{"InfiniteLearningRate", "lr: 0.001", "lr: .inf",
                 "spec.training.optimizer.lr", "not a finite number"},
        EditCase{"CheckpointsNeedADirectory", "maxSteps: 10",
                 "maxSteps: 10\n    checkpointEvery: 5",
                 "spec.training.checkpointDir", "required"},
        EditCase{"ZeroSteps", "maxSteps: 10", "maxSteps: 0",
                 "spec.training.maxSteps", "required"},
        EditCase{"DataPathMissingForText", "    path: ", "    # path: ",
                 "spec.data.path", "required for format 'text'"},
        EditCase{"UnknownDataFormat", "format: text", "format: parquet",
                 "spec.data.format", "text, tokens, megatron, synthetic"},
        EditCase{"TokenBytesForText", "format: text",
                 "format: text\n    tokenBytes: 2", "spec.data.tokenBytes",
                 "is for format 'tokens'; leave it out"},
        EditCase{"MegatronNamedByOneOfItsFiles",
                 "format: text\n    path: corpus.txt",
                 "format: megatron\n    path: corpus_text_document.bin",
                 "spec.data.path",
                 "'corpus_text_document.bin' names one of the dataset's files; "
                 "give the prefix they share, 'corpus_text_document'"},
        EditCase{"SyntheticDataWithAPath", "format: text", "format: synthetic",
                 "spec.data.path", "must be empty"},
        EditCase{"TextVocabularySmallerThanBytes", "seqLength: 16",
                 "seqLength: 16\n    vocabSize: 100", "spec.model.vocabSize",
                 ">= 256"},
        EditCase{"DuplicateKey", "maxSteps: 10",
                 "maxSteps: 10\n    maxSteps: 11", "spec.training.maxSteps",
                 "more than once"},
        EditCase{"NegativeBackoffLimit", "device: cpu",
                 "device: cpu\n  runPolicy:\n    backoffLimit: -1",
                 "spec.runPolicy.backoffLimit", "must be >= 0"},
        EditCase{"NegativeMinWorkers", "device: cpu",
                 "device: cpu\n    minWorkers: -1", "spec.resources.minWorkers",
                 "-1 must be >= 0"},
        EditCase{"MinWorkersAboveWorkers", "device: cpu",
                 "device: cpu\n    minWorkers: 9", "spec.resources.minWorkers",
                 "9 must be <= workers (8)"},
        EditCase{"MinWorkersWithoutWorkers", "workers: 8",
                 "workers: 0\n    minWorkers: 2", "spec.resources.minWorkers",
                 "needs spec.resources.workers"},
        EditCase{"GrowThresholdAsAPercentage", "device: cpu",
                 "device: cpu\n  runPolicy:\n    growThreshold: 15",
                 "spec.runPolicy.growThreshold", "15 must be in [0, 10]"},
        EditCase{"NegativeGrowThreshold", "device: cpu",
                 "device: cpu\n  runPolicy:\n    growThreshold: -0.1",
                 "spec.runPolicy.growThreshold", "-0.1 must be in [0, 10]"},
        EditCase{"ReplaceStragglersWithoutRestarts", "device: cpu",
                 "device: cpu\n  runPolicy:\n    replaceStragglers: true",
                 "spec.runPolicy.replaceStragglers",
                 "spec.runPolicy.backoffLimit is 0: it never does"},
        EditCase{"MinWorkersWithoutRestarts", "device: cpu",
                 "device: cpu\n    minWorkers: 2", "spec.resources.minWorkers",
                 "spec.runPolicy.backoffLimit is 0: it never does"}),
    [](const ::testing::TestParamInfo<EditCase>& info) {
      return info.param.name;
    });

// initFrom names a directory whose model.safetensors must be a safetensors
// file: what is missing or not one is refused naming the file.
TEST_F(JobValidatorTest, InitFromNeedsAValidSafetensorsFile) {
  const std::string job =
      JobWith("family: gpt", "family: llama\n    initFrom: hf");
  FieldErrors errors = Validate(job);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.model.initFrom"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("'hf/model.safetensors'"));
  std::filesystem::create_directory(dir_.path() + "/hf");
  dir_.WriteFile("hf/model.safetensors", "not safetensors at all");
  errors = Validate(job);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.model.initFrom"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("not a safetensors file"));
  const absl::StatusOr<std::string> header = SerializeSafetensorsHeader(
      {{.name = "lm_head.weight", .dtype = "F32", .shape = {2}}}, {});
  ASSERT_TRUE(header.ok()) << header.status();
  dir_.WriteFile("hf/model.safetensors", *header + std::string(8, '\0'));
  EXPECT_THAT(Paths(Validate(job)), IsEmpty());
}

// modules names a directory of TorchScript pieces with numLayers blocks:
// what is missing, or a count that differs, is refused naming the file.
TEST_F(JobValidatorTest, ModulesNeedEveryPieceAndNumLayersBlocks) {
  const std::string job =
      JobWith("family: gpt\n    numLayers: 8",
              "family: torchscript\n    modules: model\n    numLayers: 4");
  FieldErrors errors = Validate(job);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.model.modules"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("'model'"));
  std::filesystem::create_directory(dir_.path() + "/model");
  for (const char* piece :
       {"embedding.pt", "block-0.pt", "block-1.pt", "block-2.pt", "loss.pt"}) {
    dir_.WriteFile(absl::StrCat("model/", piece), "scripted");
  }
  errors = Validate(job);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.model.modules"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("'model/head.pt' is missing"));
  dir_.WriteFile("model/head.pt", "scripted");
  errors = Validate(job);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.model.modules"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("'model' holds 3 blocks (block-0.pt ... block-2.pt); "
                        "numLayers is 4"));
  dir_.WriteFile("model/block-3.pt", "scripted");
  EXPECT_THAT(Paths(Validate(job)), IsEmpty());
  // Its embedding and head are separate files: nothing ties them.
  std::string tied = job;
  tied.replace(tied.find("numLayers: 4"), 12,
               "numLayers: 4\n    tieEmbeddings: true");
  errors = Validate(tied);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.model.tieEmbeddings"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("is for families 'gpt' and 'llama' only"));
}

// Llama 3 8B's published sizes, except for what the job sets itself.
TEST_F(JobValidatorTest, APresetFillsTheFieldsTheJobLeavesOut) {
  chimera::v1::TrainJob job;
  const FieldErrors errors = ParseJob(
      JobWith("family: gpt\n    numLayers: 8\n    hiddenSize: 64\n"
              "    numHeads: 4\n    seqLength: 16",
              "preset: llama3-8b\n    numLayers: 4\n    seqLength: 16"),
      Options(), &job);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  const chimera::v1::ModelSpec& model = job.spec().model();
  EXPECT_EQ(model.family(), "llama");
  EXPECT_EQ(model.num_layers(), 4);
  EXPECT_EQ(model.seq_length(), 16);
  EXPECT_EQ(model.hidden_size(), 4096);
  EXPECT_EQ(model.ffn_size(), 14336);
  EXPECT_EQ(model.num_heads(), 32);
  EXPECT_EQ(model.num_kv_heads(), 8);
  EXPECT_EQ(model.vocab_size(), 128256);
  EXPECT_EQ(model.rope_theta(), 500000);
  EXPECT_FALSE(model.tie_embeddings());
  EXPECT_FALSE(model.has_rope_scaling());
}

// Llama 3.2's small models tie their embeddings; a job may untie them.
TEST_F(JobValidatorTest, APresetTiesEmbeddingsUnlessTheJobSaysOtherwise) {
  for (const auto& [line, tied] : {std::pair<std::string, bool>{"", true},
                                   {"\n    tieEmbeddings: false", false},
                                   {"\n    tieEmbeddings: true", true}}) {
    chimera::v1::TrainJob job;
    const FieldErrors errors = ParseJob(
        JobWith(
            "family: gpt\n    numLayers: 8\n    hiddenSize: 64\n"
            "    numHeads: 4\n    seqLength: 16",
            "preset: llama3.2-1b\n    numLayers: 4\n    seqLength: 16" + line),
        Options(), &job);
    ASSERT_TRUE(errors.empty()) << errors.ToStatus();
    EXPECT_EQ(job.spec().model().hidden_size(), 2048);
    EXPECT_EQ(job.spec().model().tie_embeddings(), tied) << line;
    // Llama 3.2's published rope scaling.
    const chimera::v1::RopeScaling& scaling = job.spec().model().rope_scaling();
    EXPECT_EQ(scaling.factor(), 32);
    EXPECT_EQ(scaling.low_freq_factor(), 1);
    EXPECT_EQ(scaling.high_freq_factor(), 4);
    EXPECT_EQ(scaling.original_max_position_embeddings(), 8192);
  }
}

// GPT-2's presets are tied gpt models with no key/value heads or rotary
// base of their own (which a gpt model may not set).
TEST_F(JobValidatorTest, Gpt2PresetIsATiedGpt) {
  chimera::v1::TrainJob job;
  const FieldErrors errors =
      ParseJob(JobWith("family: gpt\n    numLayers: 8\n    hiddenSize: 64\n"
                       "    numHeads: 4\n    seqLength: 16",
                       "preset: gpt2\n    numLayers: 4\n    seqLength: 16"),
               Options(), &job);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  const chimera::v1::ModelSpec& model = job.spec().model();
  EXPECT_EQ(model.family(), "gpt");
  EXPECT_EQ(model.hidden_size(), 768);
  EXPECT_EQ(model.vocab_size(), 50257);
  EXPECT_TRUE(model.tie_embeddings());
  EXPECT_EQ(model.num_kv_heads(), 0);
  EXPECT_FALSE(model.has_rope_scaling());
}

TEST_F(JobValidatorTest, GlobalBatchMustBeAMultipleOfTheGivenFactors) {
  std::string yaml = JobWith("microBatches: 4\n", "\n");
  yaml = absl::StrReplaceAll(yaml, {{"globalBatchSize: 16", "globalBatchSize: 18"}});
  FieldErrors errors = Validate(yaml);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.training.globalBatchSize"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("18 is not a multiple of data (2) x microBatchSize (2) = 4"));
}

TEST_F(JobValidatorTest, SizesWhoseProductsOverflowAreRefusedByTheirNumbers) {
  // The coordinator fuzzer's find: data x microBatchSize overflowed an int
  // (under UBSan, the process ended). Every product of the spec's sizes is
  // taken in 64 bits, and the batch's three factors stop at the global batch.
  const std::string yaml = absl::StrReplaceAll(
      JobWith("    pipeline: 4\n    data: 2\n    microBatches: 4\n",
              "    pipeline: 2147483646\n    data: 2147483647\n"
              "    microBatches: 2147483647\n"),
      {{"microBatchSize: 2", "microBatchSize: 2147483647"}});
  FieldErrors errors = Validate(yaml);
  EXPECT_THAT(Paths(errors), ::testing::Contains("spec.training.globalBatchSize"));
  EXPECT_THAT(Paths(errors), ::testing::Contains("spec.parallelism.pipeline"));
  EXPECT_THAT(Paths(errors), ::testing::Contains("spec.resources.workers"));
  EXPECT_THAT(errors.ToStatus().message(),
              HasSubstr("16 cannot be made from data (2147483647) x microBatchSize "
                        "(2147483647) x microBatches (2147483647): their product is "
                        "larger"));
  EXPECT_THAT(errors.ToStatus().message(),
              HasSubstr("8 must equal data (2147483647) x pipeline (2147483646) = "
                        "4611686011984936962"));
  EXPECT_THAT(errors.ToStatus().message(),
              HasSubstr("spec.parallelism.pipeline: 2147483646 must be in [1, 32768]"));

  // Without microBatches, data x microBatchSize would derive them.
  errors = Validate(absl::StrReplaceAll(
      JobWith("    data: 2\n    microBatches: 4\n", "    data: 65\n"),
      {{"microBatchSize: 2", "microBatchSize: -148484967"}}));
  EXPECT_THAT(Paths(errors), ::testing::Contains("spec.training.microBatchSize"));
}

TEST_F(JobValidatorTest, WorkersMayBeLeftOpen) {
  EXPECT_TRUE(Validate(JobWith("    workers: 8\n", "")).empty());
  EXPECT_TRUE(Validate(JobWith("workers: 8", "workers: 0")).empty());
}

TEST_F(JobValidatorTest, MinWorkersUpToWorkersWithRestartsIsValid) {
  for (const char* min_workers : {"1", "8"}) {
    EXPECT_THAT(Paths(Validate(JobWith(
                    "device: cpu",
                    absl::StrCat("device: cpu\n    minWorkers: ", min_workers,
                                 "\n  runPolicy:\n    backoffLimit: 2")))),
                IsEmpty())
        << min_workers;
  }
}

TEST_F(JobValidatorTest, ChimeraNeedsAnEvenDepth) {
  std::string yaml = JobWith("pipeline: 4\n    data: 2", "pipeline: 3\n    data: 2");
  yaml = absl::StrReplaceAll(yaml, {{"workers: 8", "workers: 6"}});
  FieldErrors errors = Validate(yaml);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.parallelism.pipeline"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("3 must be even for chimera"));
}

TEST_F(JobValidatorTest, MissingDataFileNamesThePath) {
  FieldErrors errors =
      Validate(JobWith(text_path_, "missing.txt"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("does not exist"));
}

TEST_F(JobValidatorTest, EmptyDataFileIsRejected) {
  dir_.WriteFile("empty.txt", "");
  FieldErrors errors = Validate(JobWith(text_path_, "empty.txt"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("is empty"));
}

TEST_F(JobValidatorTest, BinaryFileAsTextDataIsRejected) {
  dir_.WriteFile("data.bin", std::string("\x7f" "ELF\0\0\x01\x02", 8) +
                                 std::string(100, '\0'));
  FieldErrors errors = Validate(JobWith(text_path_, "data.bin"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("binary"));
}

TEST_F(JobValidatorTest, DirectoryAsDataFileIsRejected) {
  FieldErrors errors = Validate(JobWith(text_path_, "."));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("directory"));
}

TEST_F(JobValidatorTest, TextShorterThanOneSampleIsRejected) {
  dir_.WriteFile("tiny.txt", "hello");
  FieldErrors errors = Validate(JobWith(text_path_, "tiny.txt"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("fewer than seqLength + 1 = 17"));
}

TEST_F(JobValidatorTest, TokenFileOfOddSizeIsRejected) {
  dir_.WriteFile("t.bin", std::string(101, '\1'));
  std::string yaml = JobWith("format: text", "format: tokens");
  yaml = absl::StrReplaceAll(yaml, {{text_path_, "t.bin"}});
  FieldErrors errors = Validate(yaml);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("101 bytes, not a whole number of 2-byte token ids"));
}

// A job for the token file `path`, `token_bytes` a line of its own or "".
std::string TokensJob(const std::string& job, const std::string& path,
                      const std::string& token_bytes) {
  return absl::StrReplaceAll(
      job,
      {{"format: text", "format: tokens" + token_bytes}, {"corpus.txt", path}});
}

TEST_F(JobValidatorTest, TokenFilesHoldTwoOrFourByteIds) {
  dir_.WriteFile("t.bin", std::string(4 * 17, '\1'));
  const std::string job =
      JobWith("seqLength: 16", "seqLength: 16\n    vocabSize: 128256");
  FieldErrors errors = Validate(TokensJob(job, "t.bin", ""));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.model.vocabSize"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("a larger vocabulary needs spec.data.tokenBytes: 4"));
  EXPECT_THAT(Paths(Validate(TokensJob(job, "t.bin", "\n    tokenBytes: 4"))),
              IsEmpty());

  errors = Validate(TokensJob(job, "t.bin", "\n    tokenBytes: 8"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.tokenBytes"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("8 is not 2 (uint16) or 4 (uint32)"));

  dir_.WriteFile("short.bin", std::string(4 * 16, '\1'));
  errors = Validate(TokensJob(job, "short.bin", "\n    tokenBytes: 4"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("holds 16 tokens, fewer than seqLength + 1 = 17"));
}

class MegatronJobTest : public JobValidatorTest {
 protected:
  // The valid job, reading the Megatron dataset `prefix`.
  std::string MegatronJob(const std::string& prefix) {
    return JobWith("format: text\n    path: corpus.txt",
                   "format: megatron\n    path: " + prefix);
  }

  // Two documents of 10 tokens: 20 in all, enough for one sample of 17.
  const chimera::testing::MegatronDataset dataset_{
      .documents = {std::vector<int64_t>(10, 7), std::vector<int64_t>(10, 9)}};
};

TEST_F(MegatronJobTest, AValidDatasetIsAccepted) {
  dataset_.Write(dir_.path() + "/corpus_text_document");
  EXPECT_THAT(Paths(Validate(MegatronJob("corpus_text_document"))), IsEmpty());
}

TEST_F(MegatronJobTest, ACorruptIndexIsRefusedNamingTheFileAndTheFault) {
  dataset_.Write(dir_.path() + "/corpus");
  std::string index = dataset_.IndexBytes();
  dir_.WriteFile("corpus.idx", index.substr(0, index.size() - 8));
  const FieldErrors errors = Validate(MegatronJob("corpus"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("index file 'corpus.idx' counts 2 sequences and 3 "
                        "document boundaries, more than"));
}

TEST_F(MegatronJobTest, DataThatIsNotWhatTheIndexDescribesIsRefused) {
  dataset_.Write(dir_.path() + "/corpus");
  dir_.WriteFile("corpus.bin", dataset_.DataBytes().substr(2));
  const FieldErrors errors = Validate(MegatronJob("corpus"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("data file 'corpus.bin' is 38 bytes; its index "
                        "describes 20 uint16 tokens, 40 bytes"));
}

TEST_F(MegatronJobTest, MissingFilesAndShortDatasetsAreRefused) {
  FieldErrors errors = Validate(MegatronJob("none"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("index file 'none.idx' cannot be opened"));

  chimera::testing::MegatronDataset short_dataset{.documents = {{1, 2, 3}}};
  short_dataset.Write(dir_.path() + "/short");
  errors = Validate(MegatronJob("short"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(
      errors.errors()[0].message,
      HasSubstr("'short.bin' holds 3 tokens, fewer than seqLength + 1 = 17"));

  dir_.WriteFile("lonely.idx", dataset_.IndexBytes());
  errors = Validate(MegatronJob("lonely"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("lonely.bin' does not exist"));
}

TEST_F(MegatronJobTest, ItsIndexNamesTheTokenType) {
  dataset_.Write(dir_.path() + "/corpus");
  const FieldErrors errors = Validate(MegatronJob("corpus\n    tokenBytes: 4"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.tokenBytes"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("a Megatron dataset's index names its type"));
}

TEST_F(JobValidatorTest, DataFilesAreNotOpenedWhenChecksAreOff) {
  chimera::v1::TrainJob job;
  FieldErrors errors = ParseJob(JobWith(text_path_, "nonexistent/x.txt"),
                                chimera::jobspec::SpecOnly(), &job);
  EXPECT_THAT(Paths(errors), IsEmpty());
}

// PipeDream-2BW trains with consent, with checkpoints and embeddings tied
// across stages too; PipeDream, whose end stages run a micro-batch on
// different weight versions, with untied embeddings only.
TEST_F(JobValidatorTest, AConsentingPipeDream2BwJobValidates) {
  const std::string two_bw = absl::StrReplaceAll(
      JobWith("gpt", "gpt"),
      {{"schedule: chimera\n    pipeline: 4\n    data: 2\n    microBatches: 4",
        "schedule: pipedream-2bw\n    pipeline: 8\n    data: 1\n"
        "    microBatches: 8\n    allowAsynchronous: true"}});
  const std::string checkpointed =
      absl::StrReplaceAll(two_bw, {{"maxSteps: 10",
                                    "maxSteps: 10\n    checkpointEvery: 5\n"
                                    "    checkpointDir: runs"}});
  EXPECT_THAT(Paths(Validate(two_bw)), IsEmpty());
  EXPECT_THAT(Paths(Validate(checkpointed)), IsEmpty());
  const std::string tied = absl::StrReplaceAll(
      checkpointed,
      {{"numLayers: 8", "numLayers: 8\n    tieEmbeddings: true"}});
  EXPECT_THAT(Paths(Validate(tied)), IsEmpty());
  const FieldErrors errors =
      Validate(absl::StrReplaceAll(tied, {{"pipedream-2bw", "pipedream"}}));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.model.tieEmbeddings"));
  EXPECT_THAT(errors.errors()[0].message,
              HasSubstr("use pipedream-2bw, whose stages share each step's "
                        "version"));
}

// A job's paths name places under the workers' roots: by their text alone an
// absolute path or a parent directory is refused, data files checked or not
// (the coordinator checks no files, and a client token must not reach
// /etc/shadow through it).
TEST_F(JobValidatorTest, PathsOutsideTheWorkersRootsAreRefusedByTheirText) {
  for (const bool check_files : {true, false}) {
    chimera::v1::TrainJob job;
    FieldErrors errors = ParseJob(JobWith(text_path_, "/etc/shadow"),
                                  {.check_data_files = check_files}, &job);
    ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
    EXPECT_THAT(errors.errors()[0].message, HasSubstr("'/etc/shadow' is absolute"));

    std::string yaml = JobWith(text_path_, "../corpus.txt");
    yaml = absl::StrReplaceAll(
        yaml, {{"maxSteps: 10", "maxSteps: 10\n    checkpointEvery: 5\n    checkpointDir: /usr/local/lib/x"}});
    errors = ParseJob(yaml, {.check_data_files = check_files}, &job);
    ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path", "spec.training.checkpointDir"));
    EXPECT_THAT(errors.errors()[0].message, HasSubstr("parent directory"));
    EXPECT_THAT(errors.errors()[1].message, HasSubstr("'/usr/local/lib/x' is absolute"));
  }
}

// A NUL byte cut a path short wherever it reached the system:
// "corpus.txt\0garbage" passed every check as corpus.txt and trained on it.
TEST_F(JobValidatorTest, APathHoldingANulByteIsRefusedByItsField) {
  for (const bool check_files : {true, false}) {
    chimera::v1::TrainJob job;
    ASSERT_THAT(Paths(ParseJob(JobWith("gpt", "gpt"), Options(), &job)),
                IsEmpty());
    job.mutable_spec()->mutable_data()->set_path(
        std::string("corpus.txt\0garbage", 18));
    job.mutable_spec()->mutable_training()->set_checkpoint_every(5);
    job.mutable_spec()->mutable_training()->set_checkpoint_dir(
        std::string("runs\0x", 6));
    const FieldErrors errors = ValidateJob(
        job, {.check_data_files = check_files, .data_root = dir_.path()});
    ASSERT_THAT(Paths(errors),
                ElementsAre("spec.data.path", "spec.training.checkpointDir"));
    EXPECT_THAT(errors.errors()[0].message,
                HasSubstr("'corpus.txt' is followed by a NUL byte"));
    EXPECT_THAT(errors.errors()[1].message,
                HasSubstr("'runs' is followed by a NUL byte"));
  }
  // A job file says it with an escape.
  const FieldErrors errors =
      Validate(JobWith("path: corpus.txt", "path: \"corpus.txt\\0garbage\""));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.data.path"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("NUL byte"));
}

// Two jobs with a 15 MiB label made ListJobs too large for every client:
// labels are bounded as Kubernetes bounds them, and a job as a whole too.
TEST_F(JobValidatorTest, LabelsAndTheWholeJobAreBounded) {
  chimera::v1::TrainJob job;
  ASSERT_THAT(Paths(ParseJob(JobWith("gpt", "gpt"), Options(), &job)), IsEmpty());
  auto& labels = *job.mutable_metadata()->mutable_labels();
  labels["team"] = std::string(64, 'v');
  FieldErrors errors = ValidateJob(job, Options());
  ASSERT_THAT(Paths(errors), ElementsAre("metadata.labels"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("64-character value"));
  labels.clear();
  for (int i = 0; i < 65; ++i) labels[absl::StrCat("k", i)] = "v";
  EXPECT_THAT(ValidateJob(job, Options()).errors()[0].message, HasSubstr("65 labels; at most 64"));
  labels.clear();
  labels["huge"] = std::string(15 << 20, 'x');
  errors = ValidateJob(job, Options());
  ASSERT_EQ(errors.errors().size(), 1u);
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("bytes; at most 65536"));
  EXPECT_LT(errors.errors()[0].message.size(), 100u);
}

TEST_F(JobValidatorTest, EveryErrorIsReportedTogether) {
  std::string yaml = JobWith("numHeads: 4", "numHeads: 5");
  yaml = absl::StrReplaceAll(yaml, {{"family: gpt", "family: rnn"},
                                    {"workers: 8", "workers: 7"},
                                    {"lr: 0.001", "lr: -1"}});
  EXPECT_THAT(Paths(Validate(yaml)),
              ElementsAre("spec.model.family", "spec.model.hiddenSize",
                          "spec.training.optimizer.lr",
                          "spec.resources.workers"));
}

// NaN and infinity cannot come from YAML but can through the API.
TEST_F(JobValidatorTest, NotANumberOrInfinityIsRefusedInEveryRealField) {
  chimera::v1::TrainJob job;
  ASSERT_THAT(Paths(ParseJob(JobWith("gpt", "gpt"), Options(), &job)), IsEmpty());
  auto* optimizer = job.mutable_spec()->mutable_training()->mutable_optimizer();
  optimizer->set_lr(std::numeric_limits<double>::infinity());
  optimizer->set_momentum(std::nan(""));
  optimizer->set_beta1(std::nan(""));
  optimizer->set_eps(std::nan(""));
  optimizer->set_weight_decay(-std::numeric_limits<double>::infinity());
  const FieldErrors errors = ValidateJob(job, Options());
  EXPECT_THAT(Paths(errors), ElementsAre("spec.training.optimizer.lr",
                                         "spec.training.optimizer.momentum",
                                         "spec.training.optimizer.weightDecay",
                                         "spec.training.optimizer.beta1",
                                         "spec.training.optimizer.eps"));
  for (const FieldError& error : errors.errors()) {
    EXPECT_THAT(error.message, HasSubstr("is not a finite number"))
        << error.path;
  }
}

TEST_F(JobValidatorTest, ThreadsPerWorkerHasABound) {
  FieldErrors errors = Validate(
      JobWith("device: cpu", "device: cpu\n    threadsPerWorker: 5000"));
  ASSERT_THAT(Paths(errors), ElementsAre("spec.resources.threadsPerWorker"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("5000 must be <= 4096"));
}

TEST_F(JobValidatorTest, OmittedParallelismIsLeftToThePlanner) {
  std::string yaml = JobWith(
      "  parallelism:\n    schedule: chimera\n    pipeline: 4\n    data: 2\n"
      "    microBatches: 4\n",
      "  parallelism:\n");
  EXPECT_THAT(Paths(Validate(yaml)), IsEmpty());
}

TEST_F(JobValidatorTest, LoopingStagesTimesChunksMustFitTheLayers) {
  std::string yaml = JobWith("schedule: chimera", "schedule: interleaved");
  yaml = absl::StrReplaceAll(yaml, {{"microBatches: 4", "microBatches: 4\n    chunks: 3"}});
  FieldErrors errors = Validate(yaml);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.parallelism.pipeline"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("4 x 3 chunks = 12"));
}

// zbv's V cuts the model into two stages per worker.
TEST_F(JobValidatorTest, ZbVsTwoStagesPerWorkerMustFitTheLayers) {
  std::string yaml = JobWith("schedule: chimera", "schedule: zbv");
  yaml = absl::StrReplaceAll(yaml, {{"numLayers: 8", "numLayers: 6"}});
  FieldErrors errors = Validate(yaml);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.parallelism.pipeline"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("4 x 2 chunks = 8"));
}

TEST_F(JobValidatorTest, MixPipeKMustBeEven) {
  std::string yaml = JobWith("schedule: chimera", "schedule: mixpipe");
  yaml = absl::StrReplaceAll(yaml, {{"microBatches: 4", "microBatches: 4\n    mixpipeK: 3"}});
  FieldErrors errors = Validate(yaml);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.parallelism.mixpipeK"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("must be even"));
}

TEST_F(JobValidatorTest, InterleavedNeedsMicroBatchesMultipleOfDepth) {
  std::string yaml = JobWith("schedule: chimera", "schedule: interleaved");
  yaml = absl::StrReplaceAll(yaml, {{"microBatches: 4", "microBatches: 2"},
                                    {"microBatchSize: 2", "microBatchSize: 4"}});
  FieldErrors errors = Validate(yaml);
  ASSERT_THAT(Paths(errors), ElementsAre("spec.parallelism.microBatches"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("multiple of the depth 4"));
}

}  // namespace
}  // namespace chimera::jobspec
