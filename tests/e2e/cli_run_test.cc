// `chimera run`: the whole system on one machine, as the README's first
// command runs it.
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/debian_python.h"
#include "tests/support/example_job.h"
#include "tests/support/megatron_dataset.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_job.h"

namespace chimera {
namespace {

using ::chimera::testing::ChildProcess;
using ::chimera::testing::ExampleChimeraJob;
using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

// The most a job file may hold (jobspec::kMaxYamlFileBytes).
constexpr uint64_t kMaxJobBytes = 1 << 20;

// Processes whose command line mentions `needle` (other than this test).
int ProcessesMentioning(const std::string& needle) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream cmdline(entry.path() / "cmdline");
    std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    if (absl::StrContains(text, needle)) ++count;
  }
  return count;
}

// The address in the banner line of `chimera run`'s output, "coordinator on
// 127.0.0.1:PORT, 4 local workers, logs in DIR"; the directory with `dir`.
std::string BannerAddress(const std::string& out, std::string* dir = nullptr) {
  const std::string banner = "coordinator on ";
  const size_t at = out.find(banner);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no banner in " << out;
    return "";
  }
  const std::string line = out.substr(at, out.find('\n', at) - at);
  if (dir != nullptr) *dir = line.substr(line.rfind(' ') + 1);
  return line.substr(banner.size(), line.find(',') - banner.size());
}

TEST(CliRunTest, TrainsTheExampleJobAndCleansUp) {
  chimera::testing::TempDir dir;
  ProcessResult run =
      RunProcess({CHIMERA_BINARY, "run", "-f", ExampleChimeraJob(dir, 20)},
                 CHIMERA_SOURCE_DIR, absl::Minutes(3));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  // What it runs, said before the first step.
  const size_t plan = run.out.find("plan: chimera W=1 D=4 B=");
  ASSERT_NE(plan, std::string::npos) << run.out;
  EXPECT_LT(plan, run.out.find("step 1/20"));
  // What the job leaves open is the planner's: two or four pipelines, as the
  // host's cores and its speed decide (PlanSearchTest's
  // ChimeraPipelinesFollowTheHostsCoresAndTheComputeTime; docs/planner.md).
  EXPECT_THAT(run.out.substr(plan, run.out.find('\n', plan) - plan),
              ContainsRegex("pipelines=[24] "));
  EXPECT_THAT(run.out, HasSubstr("predicted step "));
  EXPECT_THAT(run.out, HasSubstr("step 20/20"));
  EXPECT_THAT(run.out, HasSubstr("SUCCEEDED"));
  EXPECT_THAT(run.out, HasSubstr("per rank, in the last step:"));
  // The summary sets the run's median step beside the prediction.
  EXPECT_THAT(run.out.substr(run.out.find("SUCCEEDED")),
              HasSubstr("; measured (median of steps 3-20): step "));
  std::string run_directory;
  BannerAddress(run.out, &run_directory);
  EXPECT_FALSE(std::filesystem::exists(run_directory))
      << "the run directory outlived a success: " << run_directory;
  // The summary's losses: training made progress.
  const size_t at = run.out.find("first loss ");
  ASSERT_NE(at, std::string::npos) << run.out;
  std::vector<std::string> words = absl::StrSplit(run.out.substr(at), ' ', absl::SkipEmpty());
  double first = 0, final = 0;
  ASSERT_TRUE(absl::SimpleAtod(words[2], &first));
  ASSERT_TRUE(absl::SimpleAtod(words[5], &final));
  EXPECT_LT(final, first - 0.5);
  // One line per rank with its bubble ratio and peak memory.
  EXPECT_THAT(run.out, HasSubstr("local-"));
  EXPECT_THAT(run.out, HasSubstr("MiB"));
}

// `chimera run` with `flags` on `job`, its profiles cached under `cache`.
ProcessResult RunCaching(const std::string& cache, const std::string& job,
                         const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {chimera::testing::FindOnPath("env"),
                                   "XDG_CACHE_HOME=" + cache,
                                   CHIMERA_BINARY,
                                   "run",
                                   "-f",
                                   job};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return RunProcess(argv, CHIMERA_SOURCE_DIR, absl::Minutes(3));
}

// "predicted step 0.040 s" of the plan line.
double PredictedStep(const std::string& out) {
  const std::string predicted = "predicted step ";
  const size_t at = out.find(predicted);
  double seconds = 0;
  if (at == std::string::npos ||
      !absl::SimpleAtod(out.substr(at + predicted.size(),
                                   out.find(' ', at + predicted.size()) - at -
                                       predicted.size()),
                        &seconds)) {
    ADD_FAILURE() << "no predicted step in " << out;
  }
  return seconds;
}

// The one host costs file in `cache`.
std::string CachedHostCosts(const std::string& cache) {
  std::string found;
  for (const auto& entry :
       std::filesystem::directory_iterator(cache + "/chimera/hosts")) {
    EXPECT_EQ(found, "") << "two host costs files";
    found = entry.path().string();
  }
  return found;
}

// A cpu job is planned from its model as timed on this machine and from
// what a worker pays on this host beyond its compute: the first run
// measures both, later runs reuse what is cached (and the planner takes
// what the cache says); --fresh-profile measures again and --no-profile
// plans from the analytic model and the coordinator's default host costs.
TEST(CliRunTest, TheModelAndTheHostAreMeasuredOnceAndReused) {
  chimera::testing::TempDir dir;
  const std::string job = ExampleChimeraJob(dir, 2);
  const std::string cache = dir.path() + "/cache";
  const ProcessResult first = RunCaching(cache, job, {});
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_THAT(first.out,
              HasSubstr("timing the model's layers on this machine"));
  EXPECT_THAT(first.out,
              ::testing::ContainsRegex("profile: " + cache +
                                       "/chimera/profiles/gpt-[0-9a-f]+\\.json "
                                       "\\(measured in [0-9.]+ s\\)"));
  EXPECT_THAT(first.out,
              HasSubstr("measuring what a worker pays on this host"));
  EXPECT_THAT(first.out,
              ContainsRegex("host costs: wake-up [0-9.]+ ms; a message [0-9.]+ "
                            "ms to post, [0-9.]+ ms to receive; co-running "
                            "\\+[0-9.]+% \\(measured in [0-9.]+ s\\)"));
  const ProcessResult second = RunCaching(cache, job, {});
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_THAT(
      second.out,
      ContainsRegex("profile: .* \\(measured before on this machine\\)"));
  EXPECT_THAT(
      second.out,
      ContainsRegex("host costs: .* \\(measured before on this machine\\)"));
  EXPECT_THAT(second.out, Not(HasSubstr("timing the model's layers")));
  EXPECT_THAT(second.out, Not(HasSubstr("measuring what a worker pays")));
  EXPECT_EQ(PredictedStep(second.out), PredictedStep(first.out));
  // A host where every message costs 10 ms of a core: the chimera schedule's
  // dozens of messages a step make the predicted step far longer.
  std::ofstream(CachedHostCosts(cache))
      << R"({"wakeUpSeconds": 0, "messagePostSeconds": 0, )"
      << R"("messageReceiveSeconds": 0.01, "coRunningSlowdown": 0})";
  const ProcessResult slow = RunCaching(cache, job, {});
  ASSERT_EQ(slow.exit_code, 0) << slow.out << slow.err;
  EXPECT_THAT(slow.out, HasSubstr("0.00 ms to post, 10.00 ms to receive"));
  EXPECT_GT(PredictedStep(slow.out), 3 * PredictedStep(second.out)) << slow.out;
  const ProcessResult fresh = RunCaching(cache, job, {"--fresh-profile"});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.out << fresh.err;
  EXPECT_THAT(fresh.out,
              HasSubstr("timing the model's layers on this machine"));
  EXPECT_THAT(fresh.out,
              HasSubstr("measuring what a worker pays on this host"));
  const ProcessResult analytic = RunCaching(cache, job, {"--no-profile"});
  ASSERT_EQ(analytic.exit_code, 0) << analytic.out << analytic.err;
  EXPECT_THAT(analytic.out, Not(HasSubstr("profile: ")));
  EXPECT_THAT(analytic.out, Not(HasSubstr("host costs: ")));
}

// A profile of `blocks` blocks in which every layer takes `seconds` forward
// and twice that backward.
std::string UniformProfile(int blocks, double seconds) {
  const std::string timing = absl::StrCat(
      "timings: [{microBatchSize: 1, forwardSeconds: ", seconds,
      ", backwardSeconds: ", 2 * seconds,
      "}], activationBytesPerSample: 1000, outputBytesPerSample: 1000, "
      "parameterBytes: 1000}\n");
  std::string yaml =
      "apiVersion: chimera.dev/v1alpha1\nkind: ModelProfile\nmetadata: {name: "
      "uniform}\nsource: measured\ndevice: cpu\nlayers:\n- {kind: embedding, " +
      timing;
  for (int b = 0; b < blocks; ++b)
    absl::StrAppend(&yaml, "- {kind: block, ", timing);
  return absl::StrCat(yaml, "- {kind: head, ", timing);
}

// The job is planned from the profile --profile gives: at 0.1 s a layer,
// each of the 4 ranks computes 2 blocks for 4 micro-batches, forward and
// backward, so a step takes seconds where the example's takes milliseconds.
TEST(CliRunTest, AGivenProfileIsWhatTheJobIsPlannedFrom) {
  chimera::testing::TempDir dir;
  const std::string profile =
      dir.WriteFile("slow.yaml", UniformProfile(8, 0.1));
  const ProcessResult run =
      RunProcess({CHIMERA_BINARY, "run", "-f", ExampleChimeraJob(dir, 2),
                  "--profile", profile},
                 CHIMERA_SOURCE_DIR, absl::Minutes(3));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, Not(HasSubstr("timing the model's layers")));
  EXPECT_GT(PredictedStep(run.out), 2.0) << run.out;
}

TEST(CliRunTest, AProfileOfAnotherModelIsRefusedNamingTheFile) {
  chimera::testing::TempDir dir;
  const std::string profile =
      dir.WriteFile("one-block.yaml", R"(apiVersion: chimera.dev/v1alpha1
kind: ModelProfile
metadata: {name: one-block}
source: measured
device: cpu
layers:
- {kind: embedding, timings: [{microBatchSize: 1, forwardSeconds: 1.0e-4, backwardSeconds: 2.0e-4}], activationBytesPerSample: 1000, outputBytesPerSample: 1000, parameterBytes: 1000}
- {kind: block, timings: [{microBatchSize: 1, forwardSeconds: 1.0e-4, backwardSeconds: 2.0e-4}], activationBytesPerSample: 1000, outputBytesPerSample: 1000, parameterBytes: 1000}
- {kind: head, timings: [{microBatchSize: 1, forwardSeconds: 1.0e-4, backwardSeconds: 2.0e-4}], activationBytesPerSample: 1000, outputBytesPerSample: 1000, parameterBytes: 1000}
)");
  const ProcessResult run =
      RunProcess({CHIMERA_BINARY, "run", "-f", ExampleChimeraJob(dir, 2),
                  "--profile", profile},
                 CHIMERA_SOURCE_DIR);
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr(profile));
  EXPECT_THAT(run.err,
              HasSubstr("layers: has 1 blocks; the job's model has 8"));
  // Refused before anything started.
  EXPECT_EQ(run.out, "");
}

TEST(CliRunTest, WorkersLeftOpenAreAsManyAsTheFixedPipelineAndDataNeed) {
  chimera::testing::TempDir dir;
  absl::StatusOr<std::string> example = ReadTextFile(ExampleChimeraJob(dir, 2), kMaxJobBytes);
  ASSERT_TRUE(example.ok()) << example.status();
  const std::string job = absl::StrReplaceAll(*example, {{"pipeline: 4, data: 1, microBatches: 4",
                                   "pipeline: 2, data: 2, microBatches: 2"},
                                  {"workers: 4, ", ""}});
  const std::string file = dir.path() + "/open.yaml";
  std::ofstream(file) << job;
  ProcessResult run = RunProcess({CHIMERA_BINARY, "run", "-f", file}, CHIMERA_SOURCE_DIR,
                                 absl::Minutes(3));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr(", 4 local workers, "));
  EXPECT_THAT(run.out, HasSubstr("plan: chimera W=2 D=2 "));
}

// The split-backward examples: workers run BACKWARD_INPUT and
// BACKWARD_WEIGHT (on a V for zbv, on two pipelines for chimera-zb), and the
// job trains.
class CliRunSplitBackwardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CliRunSplitBackwardTest, TrainsTheExample) {
  const std::string& scheme = GetParam();
  ProcessResult run =
      RunProcess({CHIMERA_BINARY, "run", "-f", "examples/" + scheme + ".yaml"},
                 CHIMERA_SOURCE_DIR, absl::Minutes(3));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("plan: " + scheme + " W=1 D=4 "));
  EXPECT_THAT(run.out, HasSubstr("step 50/50"));
  EXPECT_THAT(run.out, HasSubstr("SUCCEEDED"));
}

INSTANTIATE_TEST_SUITE_P(Examples, CliRunSplitBackwardTest,
                         ::testing::Values("zb-h1", "zbv", "chimera-zb"),
                         [](const auto& info) {
                           std::string name = info.param;
                           name.erase(std::remove(name.begin(), name.end(), '-'),
                                      name.end());
                           return name;
                         });

// "steps: N/N  first loss F  final loss L" of a run's summary: {F, L}.
std::pair<double, double> FirstAndFinalLoss(const std::string& out, int steps) {
  double first = 0, last = 0;
  const std::string summary = absl::StrCat("steps: ", steps, "/", steps);
  const size_t at = out.find(summary + "  first loss ");
  EXPECT_NE(at, std::string::npos) << out;
  if (at == std::string::npos) return {0, 0};
  EXPECT_EQ(std::sscanf(out.c_str() + at + summary.size(),
                        "  first loss %lf  final loss %lf", &first, &last),
            2)
      << out;
  return {first, last};
}

// Runs the example job FILE: it succeeds under a plan that starts with
// PLAN, and its loss falls by more than 1 over its 50 steps. The run, for
// more checks.
ProcessResult ExpectTheExampleLearns(const std::string& file,
                                     const std::string& plan) {
  ProcessResult run = RunProcess({CHIMERA_BINARY, "run", "-f", file},
                                 CHIMERA_SOURCE_DIR, absl::Minutes(3));
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("plan: " + plan));
  EXPECT_THAT(run.out, HasSubstr("SUCCEEDED"));
  const auto [first, last] = FirstAndFinalLoss(run.out, 50);
  EXPECT_LT(last, first - 1.0) << run.out;
  return run;
}

// The asynchronous example: workers carry a step's last micro-batches into
// the next, switch each stage between its two weight versions, drain after
// the last step, and the job learns.
TEST(CliRunTest, TrainsThePipeDream2BwExample) {
  const ProcessResult run = ExpectTheExampleLearns(
      "examples/pipedream-2bw.yaml", "pipedream-2bw W=1 D=4 ");
  EXPECT_THAT(run.out, HasSubstr("asynchronous: each step runs on the weights "
                                 "one update old, so the weights are not "
                                 "those of mini-batch SGD"));
}

// PipeDream: every backward updates its stage, each micro-batch's backward
// runs on the weights its forward ran on, and the job learns.
TEST(CliRunTest, TrainsThePipeDreamExample) {
  const ProcessResult run =
      ExpectTheExampleLearns("examples/pipedream.yaml", "pipedream W=1 D=4 ");
  EXPECT_THAT(run.out, HasSubstr("asynchronous: every micro-batch updates its "
                                 "stage"));
}

// DAPPLE's replication: stage 0 on two workers, each on half of every
// micro-batch, stage 1 on one, and the job learns.
TEST(CliRunTest, TrainsTheDappleExample) {
  // The warm-up policy is the planner's to choose (PA and PB tie here).
  const ProcessResult run =
      ExpectTheExampleLearns("examples/dapple.yaml", "1f1b W=1 D=2 B=4 N=4 ");
  EXPECT_THAT(run.out, HasSubstr(" replication=2:1, predicted step"));
}

// The breadth-first paper's setting, small: no plan of 2 or 4 chunks per
// worker fits the job's memory, so the planner loops a block per stage with
// the weights sharded too (gathered before each run of uses, released
// after), and the job learns.
TEST(CliRunTest, TrainsTheFullyShardedBreadthFirstExample) {
  const ProcessResult run = ExpectTheExampleLearns(
      "examples/breadth-first-sharded.yaml", "breadth-first W=2 D=2 ");
  EXPECT_THAT(run.out, HasSubstr(" v=8 sharding=full"));
}

// The Llama example: rotary positions, RMSNorm, SwiGLU and grouped-query
// attention through every rank of a Chimera pipeline, and a byte-level
// Llama learns the corpus.
TEST(CliRunTest, TrainsTheLlamaExample) {
  const ProcessResult run =
      ExpectTheExampleLearns("examples/llama.yaml", "chimera W=1 D=4 ");
  EXPECT_THAT(run.out, HasSubstr("job llama-chimera-"));
}

// The TorchScript example as its model.py says to run it: the user's own
// decoder, scripted by Debian's PyTorch, timed for the planner and trained
// through every rank of a Chimera pipeline, and it learns. Pieces of
// another width than the job declares are refused naming the size.
TEST(CliRunTest, TrainsTheTorchScriptExample) {
  const chimera::testing::TempDir dir;
  std::filesystem::create_directories(dir.path() + "/examples/data");
  std::filesystem::copy_file(
      std::string(CHIMERA_SOURCE_DIR) + "/examples/data/corpus.txt",
      dir.path() + "/examples/data/corpus.txt");
  const ProcessResult exported = RunProcess(
      {chimera::testing::kDebianPython,
       std::string(CHIMERA_SOURCE_DIR) + "/scripts/export-torchscript",
       std::string(CHIMERA_SOURCE_DIR) + "/examples/torchscript/model.py",
       "--out", "examples/torchscript/model"},
      dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.out << exported.err;
  const std::string job =
      std::string(CHIMERA_SOURCE_DIR) + "/examples/torchscript/job.yaml";

  ProcessResult run = RunProcess({CHIMERA_BINARY, "run", "-f", job}, dir.path(),
                                 absl::Minutes(3));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("profile: "));
  EXPECT_THAT(run.out, HasSubstr("plan: chimera W=1 D=4 "));
  EXPECT_THAT(run.out, HasSubstr("SUCCEEDED"));
  const auto [first, last] = FirstAndFinalLoss(run.out, 50);
  EXPECT_LT(last, first - 1.0) << "the scripted decoder learns the corpus";

  const std::string narrower = dir.WriteFile(
      "narrower.yaml",
      absl::StrReplaceAll(*ReadTextFile(job, kMaxJobBytes),
                          {{"hiddenSize: 64", "hiddenSize: 32"}}));
  run = RunProcess({CHIMERA_BINARY, "run", "-f", narrower}, dir.path(),
                   absl::Minutes(3));
  EXPECT_NE(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.err,
              HasSubstr("the TorchScript model in 'examples/torchscript/model' "
                        "has 64 for model.hidden_size (its hidden states' "
                        "width); the job declares 32"));
}

// `chimera run` of the tiny job for 3 steps on `dir`'s data file `path` of
// `format`, with a vocabulary of `vocab`; the job file goes in `dir`.
ProcessResult RunTinyJobOn(const chimera::testing::TempDir& dir,
                           const std::string& format, const std::string& path,
                           int vocab) {
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  job.mutable_spec()->mutable_model()->set_vocab_size(vocab);
  job.mutable_spec()->mutable_training()->set_max_steps(3);
  job.mutable_spec()->mutable_data()->set_format(format);
  job.mutable_spec()->mutable_data()->set_path(path);
  const std::string file =
      dir.WriteFile("job.yaml", chimera::testing::JobYaml(job));
  return RunProcess({CHIMERA_BINARY, "run", "-f", file, "--no-profile"},
                    dir.path(), absl::Minutes(3));
}

// Data tokenized for Megatron-LM trains as it is: an int32 dataset (the
// type Megatron picks for vocabularies over 65,500) of ids above uint16's.
TEST(CliRunTest, TrainsOnAMegatronDataset) {
  chimera::testing::TempDir dir;
  chimera::testing::MegatronDataset dataset{.dtype_code = 4};
  for (int64_t document = 0; document < 20; ++document) {
    std::vector<int64_t>& ids = dataset.documents.emplace_back();
    for (int64_t i = 0; i < 10 + document; ++i)
      ids.push_back(69000 + 3 * i + document);
  }
  dataset.Write(dir.path() + "/corpus_text_document");
  ProcessResult run =
      RunTinyJobOn(dir, "megatron", "corpus_text_document", 70000);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("step 3/3"));
  EXPECT_THAT(run.out, HasSubstr("SUCCEEDED"));

  // A dataset cut short is refused before any worker starts.
  dir.WriteFile("corpus_text_document.bin", dataset.DataBytes().substr(4));
  run = RunTinyJobOn(dir, "megatron", "corpus_text_document", 70000);
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_THAT(
      run.err,
      HasSubstr("spec.data.path: data file 'corpus_text_document.bin' is"));
}

// A user's own vocabulary: `chimera tokenize` trains a SentencePiece model
// on the example corpus and writes the tokens a job then trains on.
TEST(CliRunTest, TrainsOnTextTokenizedByChimeraTokenize) {
  chimera::testing::TempDir dir;
  ProcessResult tokenize = RunProcess(
      {CHIMERA_BINARY, "tokenize", "-i",
       std::string(CHIMERA_SOURCE_DIR) + "/examples/data/corpus.txt", "-o",
       "corpus.tokens", "-m", "corpus.model", "--train-vocab", "256"},
      dir.path());
  ASSERT_EQ(tokenize.exit_code, 0) << tokenize.out << tokenize.err;
  EXPECT_THAT(tokenize.out,
              HasSubstr("trained corpus.model: a unigram model of 256 pieces"));
  EXPECT_THAT(tokenize.out,
              HasSubstr("from 992 lines (240167 bytes of text), 2-byte ids"));
  EXPECT_THAT(tokenize.out,
              HasSubstr("data: {format: tokens, path: corpus.tokens}"));

  ProcessResult run = RunTinyJobOn(dir, "tokens", "corpus.tokens", 256);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("SUCCEEDED"));
}

// `chimera tokenize` checks its flags itself and passes chimera-tokenize's
// errors and exit codes on.
TEST(CliRunTest, TokenizeExitsTwoOnBadInput) {
  ProcessResult help = RunProcess({CHIMERA_BINARY, "tokenize", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("chimera tokenize [OPTIONS]"));
  EXPECT_THAT(help.out, HasSubstr("--train-vocab"));
  ProcessResult missing =
      RunProcess({CHIMERA_BINARY, "tokenize", "-i", "/nonexistent.txt", "-o",
                  "out.tokens", "-m", "m.model"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(
      missing.err,
      HasSubstr(
          "chimera tokenize: --input: '/nonexistent.txt' does not exist"));
  ProcessResult no_flags = RunProcess({CHIMERA_BINARY, "tokenize"});
  EXPECT_EQ(no_flags.exit_code, 2);
  EXPECT_THAT(no_flags.err, HasSubstr("--input is required"));
}

TEST(CliRunTest, InvalidJobFileExitsTwoWithoutStartingAnything) {
  chimera::testing::TempDir dir;
  const std::string job = dir.WriteFile("bad.yaml", "apiVersion: chimera.dev/v1alpha1\n");
  ProcessResult run = RunProcess({CHIMERA_BINARY, "run", "-f", job});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("kind: '' must be 'TrainJob'"));
}

TEST(CliRunTest, GpuJobOnWorkersWithoutAGpuEndsWithTheReason) {
  // The workers here have no GPU (and a CPU-only LibTorch): the run must end
  // with the reason instead of leaving the job pending for ever.
  chimera::testing::TempDir dir;
  absl::StatusOr<std::string> yaml =
      ReadTextFile(ExampleChimeraJob(dir, 2), kMaxJobBytes);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  const std::string from = "device: cpu";
  yaml->replace(yaml->find(from), from.size(), "device: gpu");
  ProcessResult run = RunProcess(
      {CHIMERA_BINARY, "run", "-f", dir.WriteFile("gpu.yaml", *yaml)},
      CHIMERA_SOURCE_DIR, absl::Minutes(2));
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("spec.resources.device is gpu, but local worker local-"));
  EXPECT_THAT(run.err, HasSubstr("offers no GPU"));
  const std::string address = BannerAddress(run.out);
  ASSERT_NE(address, "");
  EXPECT_EQ(ProcessesMentioning(address), 0) << "workers left behind";
}

TEST(CliRunTest, InterruptStopsTheJobAndLeavesNoProcessBehind) {
  chimera::testing::TempDir dir;
  net::ChildProcess run(
      {CHIMERA_BINARY, "run", "-f", ExampleChimeraJob(dir, 100000)},
      CHIMERA_SOURCE_DIR);
  // Wait until training runs, then press Ctrl-C.
  std::string address;
  absl::StatusOr<std::string> line;
  do {
    line = run.ReadLine(absl::Seconds(60));
    if (line.ok() && absl::StartsWith(*line, "coordinator on ")) {
      address = BannerAddress(*line);
    }
  } while (line.ok() && !absl::StartsWith(*line, "step "));
  ASSERT_NE(address, "") << run.out();
  ASSERT_TRUE(line.ok()) << line.status() << run.err();
  run.Signal(SIGINT);
  EXPECT_EQ(run.Wait(absl::Seconds(60)), 130) << run.out() << run.err();
  EXPECT_THAT(run.out(), HasSubstr("STOPPED"));
  EXPECT_EQ(ProcessesMentioning(address), 0) << "worker processes outlived chimera run";
  // The run directory, with the workers' logs, is kept and named.
  const std::string kept = "the workers' logs and the job store are kept in ";
  const size_t at = run.err().find(kept);
  ASSERT_NE(at, std::string::npos) << run.err();
  const std::string directory = std::string(absl::StripAsciiWhitespace(
      run.err().substr(at + kept.size(), run.err().find('\n', at) - at - kept.size())));
  EXPECT_TRUE(std::filesystem::exists(directory + "/worker-0.log")) << directory;
  std::filesystem::remove_all(directory);
}

// `chimera run ... | head`: once its output is closed it stops the job and
// its workers, names the run directory it keeps, and exits 141, where
// SIGPIPE used to kill it before it had stopped anything.
TEST(CliRunTest, ClosedOutputStopsTheJobAndLeavesNoProcessBehind) {
  chimera::testing::TempDir dir;
  ProcessResult piped = RunProcess(
      {
          chimera::testing::FindOnPath("bash"),
          "-c",
          absl::StrCat(CHIMERA_BINARY, " run -f ",
                       ExampleChimeraJob(dir, 100000),
                       " | sed -n '/^coordinator on /{p;q}'; echo \"exit "
                       "${PIPESTATUS[0]}\""),
      },
      CHIMERA_SOURCE_DIR, absl::Minutes(3));
  ASSERT_EQ(piped.exit_code, 0) << piped.out << piped.err;
  EXPECT_THAT(piped.out, HasSubstr("exit 141"));
  EXPECT_THAT(piped.err, HasSubstr("standard output closed: stopping job "));
  const std::string address = BannerAddress(piped.out);
  ASSERT_NE(address, "");
  EXPECT_EQ(ProcessesMentioning(address), 0) << "workers outlived chimera run";
  const std::string kept = "are kept in ";
  const size_t at = piped.err.find(kept);
  ASSERT_NE(at, std::string::npos) << piped.err;
  std::filesystem::remove_all(std::string(absl::StripAsciiWhitespace(
      piped.err.substr(at + kept.size(), piped.err.find('\n', at) - at - kept.size()))));
}

// For scripts: one JSON object per line, the plan before the steps, and last
// the job as it ended.
TEST(CliRunTest, JsonOutputIsOneObjectPerLineFromThePlanToTheEndedJob) {
  chimera::testing::TempDir dir;
  ProcessResult run = RunProcess(
      {CHIMERA_BINARY, "run", "-f", ExampleChimeraJob(dir, 3), "-o", "json"},
      CHIMERA_SOURCE_DIR, absl::Minutes(3));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::vector<nlohmann::json> lines;
  for (absl::string_view line : absl::StrSplit(run.out, '\n', absl::SkipEmpty())) {
    lines.push_back(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false));
    ASSERT_FALSE(lines.back().is_discarded()) << "not JSON: " << line;
  }
  ASSERT_GE(lines.size(), 5u) << run.out;
  int plan = -1, first_step = -1, steps = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].contains("plan") && plan < 0) plan = static_cast<int>(i);
    if (lines[i].contains("step")) {
      if (first_step < 0) first_step = static_cast<int>(i);
      ++steps;
    }
  }
  ASSERT_GE(plan, 0) << run.out;
  EXPECT_EQ(lines[plan]["plan"]["scheme"], "chimera");
  EXPECT_LT(plan, first_step);
  EXPECT_EQ(steps, 3);
  const nlohmann::json& ended = lines.back()["job"];
  EXPECT_EQ(ended["status"]["state"], "JOB_STATE_SUCCEEDED");
  EXPECT_EQ(ended["status"]["completedSteps"], 3);
  EXPECT_TRUE(ended["status"]["endTime"].is_string());
}

}  // namespace
}  // namespace chimera
