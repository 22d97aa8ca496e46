// `chimera` and `chimera-worker` run as a user runs them: exit codes, what
// goes to stdout and stderr, and --help that tells the truth.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_job.h"

namespace chimera {
namespace {

using ::chimera::testing::JobYaml;
using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::chimera::testing::TinyJob;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

ProcessResult Chimera(std::vector<std::string> args) {
  args.insert(args.begin(), CHIMERA_BINARY);
  return RunProcess(args, CHIMERA_SOURCE_DIR);
}

std::vector<std::string> ExampleFiles() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(CHIMERA_SOURCE_DIR) / "examples")) {
    if (entry.path().extension() == ".yaml") {
      files.push_back("examples/" + entry.path().filename().string());
    }
  }
  return files;
}

TEST(CliTest, HelpListsTheCommandsAndExitCodes) {
  ProcessResult r = Chimera({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("validate"));
  EXPECT_THAT(r.out, HasSubstr("version"));
  EXPECT_THAT(r.out, HasSubstr("Exit codes"));
}

TEST(CliTest, NoCommandIsAUsageError) {
  ProcessResult r = Chimera({});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(CliTest, UnknownCommandIsAUsageError) {
  ProcessResult r = Chimera({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("frobnicate"));
}

TEST(CliTest, JobCommandHelpShowsTheCoordinatorFlags) {
  for (const char* command :
       {"submit", "status", "logs", "stop", "list", "describe", "workers"}) {
    ProcessResult r = Chimera({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command;
    for (const char* flag :
         {"--address", "--token", "--tls-ca", "--timeout", "-o,--output"}) {
      EXPECT_THAT(r.out, HasSubstr(flag))
          << command << " --help lacks " << flag;
    }
  }
}

TEST(CliTest, MisspelledCommandSuggestsTheCommand) {
  ProcessResult r = Chimera({"sumbit", "-f", "examples/chimera.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err,
              HasSubstr("unknown command 'sumbit'; did you mean 'submit'?"));
}

TEST(CliTest, MisspelledFlagSuggestsTheFlagOfItsCommand) {
  ProcessResult logs = Chimera({"logs", "job-1", "--folow"});
  EXPECT_EQ(logs.exit_code, 2);
  EXPECT_THAT(logs.err, HasSubstr("unknown flag '--folow' for 'chimera logs'; "
                                  "did you mean '--follow'?"));
  // A global flag, given after the command, counts too.
  ProcessResult list = Chimera({"list", "--adress=127.0.0.1:1"});
  EXPECT_EQ(list.exit_code, 2);
  EXPECT_THAT(list.err, HasSubstr("did you mean '--address'?"));
  ProcessResult none =
      Chimera({"validate", "-f", "examples/chimera.yaml", "--zzzzzz"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err,
              HasSubstr("unknown flag '--zzzzzz' for 'chimera validate'"));
  EXPECT_THAT(none.err, ::testing::Not(HasSubstr("did you mean")));
}

TEST(CliTest, VersionPrintsTheVersion) {
  ProcessResult r = Chimera({"version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, StartsWith("chimera 0."));
}

TEST(CliTest, VersionFlagNamesCommitBuildTypeAndLibTorch) {
  ProcessResult r = Chimera({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("chimera 0."));
  EXPECT_THAT(r.out, HasSubstr(" (commit "));
  EXPECT_THAT(r.out, HasSubstr(", LibTorch 1."));
  EXPECT_EQ(Chimera({"version"}).out, r.out);
}

TEST(CliTest, VersionAsJsonUsesTheJobFilesFieldNames) {
  ProcessResult r = Chimera({"version", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json version = nlohmann::json::parse(r.out);
  for (const char* field :
       {"version", "gitCommit", "buildType", "libtorchVersion"}) {
    ASSERT_TRUE(version.contains(field)) << field << " in " << r.out;
    EXPECT_FALSE(version.at(field).get<std::string>().empty()) << field;
  }
  EXPECT_THAT(Chimera({"--version"}).out,
              HasSubstr(version.at("gitCommit").get<std::string>()));
}

TEST(CliValidateTest, EveryExamplePrintsOk) {
  const std::vector<std::string> files = ExampleFiles();
  ASSERT_FALSE(files.empty());
  for (const std::string& file : files) {
    ProcessResult r = Chimera({"validate", "-f", file});
    EXPECT_EQ(r.exit_code, 0) << file << "\n" << r.err;
    EXPECT_THAT(r.out, StartsWith("ok: " + file + ": ")) << file;
    EXPECT_EQ(r.err, "") << file;
  }
}

TEST(CliValidateTest, InvalidFilePrintsEveryErrorAndExitsTwo) {
  chimera::testing::TempDir dir;
  chimera::v1::TrainJob bad = TinyJob();
  bad.mutable_spec()->mutable_model()->set_num_layers(4);
  bad.mutable_spec()->mutable_model()->set_hidden_size(30);
  bad.mutable_spec()->mutable_model()->set_num_heads(4);
  bad.mutable_spec()->mutable_parallelism()->set_schedule("chimera");
  bad.mutable_spec()->mutable_parallelism()->set_pipeline(3);
  bad.mutable_spec()->mutable_resources()->set_workers(3);
  const std::string job = dir.WriteFile("bad.yaml", JobYaml(bad));
  ProcessResult r = Chimera({"validate", "-f", job});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr(job + ": spec.model.hiddenSize: 30 is not divisible by numHeads (4)\n"));
  EXPECT_THAT(r.err, HasSubstr(job + ": spec.parallelism.pipeline: 3 must be even for chimera"));
}

// A replication with a stage of no workers, or one whose slices do not
// divide the micro-batch, is refused naming the field.
TEST(CliValidateTest, ReplicationErrorsNameTheirFields) {
  chimera::testing::TempDir dir;
  chimera::v1::TrainJob job = TinyJob();
  auto* parallelism = job.mutable_spec()->mutable_parallelism();
  parallelism->clear_pipeline();
  parallelism->set_replication("2:1");
  job.mutable_spec()->mutable_resources()->set_workers(3);
  EXPECT_EQ(Chimera({"validate", "-f", dir.WriteFile("ok.yaml", JobYaml(job))})
                .exit_code,
            0);
  parallelism->set_replication("2:0");
  const std::string zero = dir.WriteFile("zero.yaml", JobYaml(job));
  ProcessResult r = Chimera({"validate", "-f", zero});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(zero + ": spec.parallelism.replication: '2:0' "
                                      "is not a replication: '0' must be a "
                                      "number of workers in [1, 32768]"));
  parallelism->set_replication("3:1");
  job.mutable_spec()->mutable_resources()->set_workers(4);
  const std::string slices = dir.WriteFile("slices.yaml", JobYaml(job));
  r = Chimera({"validate", "-f", slices});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(slices + ": spec.training.microBatchSize: 2 "
                                        "does not split into the 3 slices of "
                                        "replication 3:1"));
}

// Data paths are checked as the workers will read them: relative to a data
// root (--data-root, default the current directory), never outside it; a
// misspelled field gets the one it resembles.
TEST(CliValidateTest, DataPathsAreCheckedUnderTheDataRoot) {
  chimera::testing::TempDir dir;
  chimera::v1::TrainJob job = TinyJob();
  job.mutable_spec()->mutable_data()->set_format("text");
  job.mutable_spec()->mutable_data()->set_path("corpus.txt");
  const std::string file = dir.WriteFile("job.yaml", JobYaml(job));
  dir.WriteFile("corpus.txt", std::string(100, 'a'));
  EXPECT_EQ(Chimera({"validate", "-f", file, "--data-root", dir.path()}).exit_code, 0);
  ProcessResult elsewhere = Chimera({"validate", "-f", file});  // from the source tree
  EXPECT_EQ(elsewhere.exit_code, 2);
  EXPECT_THAT(elsewhere.err, HasSubstr("spec.data.path: 'corpus.txt' does not exist"));

  job.mutable_spec()->mutable_data()->set_path("/etc/passwd");
  ProcessResult absolute = Chimera(
      {"validate", "-f", dir.WriteFile("abs.yaml", JobYaml(job)), "--skip-data-check"});
  EXPECT_EQ(absolute.exit_code, 2);
  EXPECT_THAT(absolute.err, HasSubstr("spec.data.path: '/etc/passwd' is absolute"));

  const std::string typo = dir.WriteFile(
      "typo.yaml", absl::StrReplaceAll(JobYaml(TinyJob()), {{"\"numLayers\"", "\"numLayer\""}}));
  ProcessResult misspelled = Chimera({"validate", "-f", typo});
  EXPECT_EQ(misspelled.exit_code, 2);
  EXPECT_THAT(misspelled.err, HasSubstr("did you mean 'numLayers'?"));
}

TEST(CliValidateTest, JsonOutputIsMachineReadable) {
  ProcessResult r = Chimera({"validate", "-f", "examples/chimera.yaml",
                             "-f", "/nonexistent.yaml", "-o", "json"});
  EXPECT_EQ(r.exit_code, 2);
  nlohmann::json results = nlohmann::json::parse(r.out);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0]["valid"].get<bool>());
  EXPECT_FALSE(results[1]["valid"].get<bool>());
  EXPECT_THAT(results[1]["errors"][0]["message"].get<std::string>(),
              HasSubstr("does not exist"));
}

TEST(CliValidateTest, MissingFileFlagIsAUsageError) {
  ProcessResult r = Chimera({"validate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--file is required"));
}

TEST(WorkerCliTest, VersionNamesLibTorch) {
  ProcessResult r = RunProcess({CHIMERA_WORKER_BINARY, "--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("LibTorch 1."));
}

TEST(WorkerCliTest, DevicesListsTheCpu) {
  ProcessResult r = RunProcess({CHIMERA_WORKER_BINARY, "devices"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("communicators: gloo"));
  EXPECT_THAT(r.out, HasSubstr("cpu:0"));
  EXPECT_THAT(r.out, HasSubstr("iB memory"));  // GiB, not raw bytes
  if (!absl::StrContains(r.out, "gpu:")) {
    EXPECT_THAT(r.out, Not(HasSubstr("nccl"))) << "NCCL is of no use without a GPU";
  }
}

TEST(WorkerCliTest, DaemonsSayTheirVersionAndDevicesAsJsonToo) {
  ProcessResult worker = RunProcess({CHIMERA_WORKER_BINARY, "version", "-o", "json"});
  ASSERT_EQ(worker.exit_code, 0) << worker.err;
  const nlohmann::json version = nlohmann::json::parse(worker.out);
  EXPECT_EQ(version.at("program"), "chimera-worker");
  EXPECT_FALSE(version.at("gitCommit").get<std::string>().empty());
  EXPECT_THAT(version.at("runsOnLibtorch").get<std::string>(), StartsWith("1."));
  ProcessResult coordinator =
      RunProcess({CHIMERA_COORDINATOR_BINARY, "--version", "-o", "json"});
  ASSERT_EQ(coordinator.exit_code, 0) << coordinator.err;
  EXPECT_EQ(nlohmann::json::parse(coordinator.out).at("program"), "chimera-coordinator");
  EXPECT_EQ(nlohmann::json::parse(coordinator.out).at("gitCommit"), version.at("gitCommit"));

  ProcessResult devices = RunProcess({CHIMERA_WORKER_BINARY, "devices", "-o", "json"});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  const nlohmann::json offered = nlohmann::json::parse(devices.out);
  EXPECT_GT(offered.at("memoryBytes").get<int64_t>(), 0);
  EXPECT_EQ(offered.at("devices").at(0).at("kind"), "cpu");
  EXPECT_EQ(offered.at("communicators").at(0), "gloo");
  EXPECT_EQ(RunProcess({CHIMERA_WORKER_BINARY, "version", "-o", "xml"}).exit_code, 2);
}

// Each mode is a subcommand with its own flags and --help.
TEST(WorkerCliTest, EachSubcommandHasItsOwnHelp) {
  const struct {
    const char* command;
    const char* has;
    const char* lacks;
  } cases[] = {{"daemon", "--coordinator", "--rank"},
               {"standalone", "--rank", "--coordinator"},
               {"profile", "--out", "--rank"},
               {"devices", "--output", "--job"},
               {"version", "--output", "--job"}};
  for (const auto& c : cases) {
    ProcessResult help = RunProcess({CHIMERA_WORKER_BINARY, c.command, "--help"});
    EXPECT_EQ(help.exit_code, 0) << c.command << ": " << help.err;
    EXPECT_THAT(help.out, HasSubstr(c.has)) << c.command;
    EXPECT_THAT(help.out, Not(HasSubstr(c.lacks))) << c.command;
  }
  ProcessResult top = RunProcess({CHIMERA_WORKER_BINARY, "--help"});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_THAT(top.out, HasSubstr("standalone"));
  EXPECT_THAT(top.out, Not(HasSubstr("run-task"))) << "internal";
  EXPECT_EQ(RunProcess({CHIMERA_WORKER_BINARY}).exit_code, 2);
}

// A deployment written for the flags before subcommands fails at once,
// saying what to write instead.
TEST(WorkerCliTest, AnOldFormIsExitTwoNamingItsSubcommand) {
  const struct {
    std::vector<std::string> args;
    const char* hint;
  } cases[] = {
      {{"--coordinator", "127.0.0.1:50051", "--worker-id", "w0"},
       "write 'chimera-worker daemon --coordinator ...'"},
      {{"--worker-id=w0", "--coordinator=127.0.0.1:50051"},
       "write 'chimera-worker daemon --coordinator ...'"},
      {{"--standalone", "--job", "job.yaml"}, "write 'chimera-worker standalone'"},
      {{"--profile", "--job", "job.yaml"}, "write 'chimera-worker profile'"},
      {{"--devices"}, "write 'chimera-worker devices'"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {CHIMERA_WORKER_BINARY};
    args.insert(args.end(), c.args.begin(), c.args.end());
    ProcessResult old = RunProcess(args);
    EXPECT_EQ(old.exit_code, 2) << c.hint << ": " << old.err;
    EXPECT_THAT(old.err, HasSubstr(c.hint));
    EXPECT_THAT(old.err, HasSubstr("is the form before subcommands"));
  }
}

TEST(CliHelpTest, HelpCommandPrintsACommandsHelpOrSuggestsOne) {
  ProcessResult help = Chimera({"help", "submit"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("--no-wait"));
  ProcessResult typo = Chimera({"help", "sumbit"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("did you mean 'submit'?"));
}

// What bash offers for the words typed so far, with the completion script
// chimera prints loaded.
std::string BashCompletes(const std::string& script, const std::string& words, int word) {
  ProcessResult r = RunProcess(
      {chimera::testing::FindOnPath("bash"), "-c",
       absl::StrCat("source ", script, "; COMP_WORDS=(", words, "); COMP_CWORD=", word,
                    "; _chimera; echo \"${COMPREPLY[*]}\"")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

TEST(CliHelpTest, CompletionScriptsCompleteCommandsAndEachCommandsFlags) {
  chimera::testing::TempDir dir;
  ProcessResult bash = Chimera({"completion", "bash"});
  ASSERT_EQ(bash.exit_code, 0) << bash.err;
  const std::string script = dir.WriteFile("chimera.bash", bash.out);
  EXPECT_EQ(BashCompletes(script, "chimera su", 1), "submit\n");
  EXPECT_EQ(BashCompletes(script, "chimera submit --no", 2), "--no-wait\n");
  EXPECT_THAT(BashCompletes(script, "chimera list --add", 2), HasSubstr("--address"));
  EXPECT_THAT(BashCompletes(script, "chimera plan --clu", 2), HasSubstr("--cluster"));

  ProcessResult zsh = Chimera({"completion", "zsh"});
  ASSERT_EQ(zsh.exit_code, 0) << zsh.err;
  const std::string zsh_script = dir.WriteFile("chimera.zsh", zsh.out);
  ProcessResult loaded = RunProcess(
      {chimera::testing::FindOnPath("zsh"), "-fc",
       absl::StrCat("autoload -U compinit && compinit -u -D; source ", zsh_script,
                    "; print -r -- ${_comps[chimera]}")});
  ASSERT_EQ(loaded.exit_code, 0) << "zsh (scripts/install-deps installs it): " << loaded.err;
  EXPECT_THAT(loaded.out, HasSubstr("_chimera"));
  EXPECT_EQ(Chimera({"completion", "fish"}).exit_code, 2);
}

}  // namespace
}  // namespace chimera
