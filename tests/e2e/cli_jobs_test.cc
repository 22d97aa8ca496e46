// The job commands against a real coordinator on loopback: submit (--no-wait,
// and interrupted while following), list, status, describe, stop, workers,
// health, and their errors.
#include <signal.h>

#include <optional>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/file_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/child_process.h"
#include "nlohmann/json.hpp"
#include "tests/support/coordinator_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::chimera::testing::CoordinatorProcess;
using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class CliJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<CoordinatorProcess> coordinator = CoordinatorProcess::Start(
        CHIMERA_COORDINATOR_BINARY,
        {"--db", dir_.path() + "/jobs.db", "--max-workers", "8"});
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
  }
  void TearDown() override {
    if (coordinator_) {
      EXPECT_EQ(coordinator_->Stop(), 0);
    }
  }

  ProcessResult Chimera(std::vector<std::string> args) {
    args.insert(args.begin(), CHIMERA_BINARY);
    args.push_back("--address");
    args.push_back(coordinator_->address());
    return RunProcess(args, CHIMERA_SOURCE_DIR);
  }

  chimera::testing::TempDir dir_;
  std::optional<CoordinatorProcess> coordinator_;
};

TEST_F(CliJobsTest, SubmitNoWaitPrintsTheIdAloneAndTheJobIsListedPending) {
  ProcessResult submit = Chimera({"submit", "-f", "examples/chimera.yaml", "--no-wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = std::string(absl::StripAsciiWhitespace(submit.out));
  EXPECT_THAT(id, StartsWith("gpt-chimera-"));
  EXPECT_EQ(submit.out, id + "\n");

  ProcessResult list = Chimera({"list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr(id));
  EXPECT_THAT(list.out, HasSubstr("PENDING"));
  EXPECT_THAT(list.out, HasSubstr("chimera W=1 D=4"));

  ProcessResult status = Chimera({"status", id, "-o", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  nlohmann::json job = nlohmann::json::parse(status.out);
  EXPECT_EQ(job["id"], id);
  EXPECT_EQ(job["status"]["state"], "JOB_STATE_PENDING");

  // Planned when it starts; until then it says what it waits for.
  const std::string waiting =
      "message:  waiting: needs 4 idle cpu workers (0 registered, 0 busy)";
  ProcessResult describe;
  for (int attempt = 0; attempt < 100; ++attempt) {
    describe = Chimera({"describe", id});
    ASSERT_EQ(describe.exit_code, 0) << describe.err;
    if (absl::StrContains(describe.out, waiting)) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_THAT(describe.out, HasSubstr(waiting));
  EXPECT_THAT(describe.out, HasSubstr("plan:     chimera W=1 D=4 (the rest planned at start)"));

  ProcessResult stop = Chimera({"stop", id});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_THAT(stop.out, HasSubstr("STOPPED"));
  ProcessResult again = Chimera({"stop", id});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("FAILED_PRECONDITION"));
}

TEST_F(CliJobsTest, JobsAreFoundByNameOrTheStartOfTheirIdUnlessAmbiguous) {
  const std::string first = std::string(absl::StripAsciiWhitespace(
      Chimera({"submit", "-f", "examples/chimera.yaml", "--no-wait"}).out));
  const std::string random_part = first.substr(std::string("gpt-chimera-").size());
  ASSERT_EQ(random_part.size(), 8u) << first;

  for (const std::string& reference :
       {std::string("gpt-chimera"), first.substr(0, first.size() - 3),
        random_part.substr(0, 4)}) {
    ProcessResult status = Chimera({"status", reference, "-o", "json"});
    ASSERT_EQ(status.exit_code, 0) << reference << ": " << status.err;
    EXPECT_EQ(nlohmann::json::parse(status.out)["id"], first) << reference;
  }

  const std::string second = std::string(absl::StripAsciiWhitespace(
      Chimera({"submit", "-f", "examples/chimera.yaml", "--no-wait"}).out));
  ProcessResult ambiguous = Chimera({"stop", "gpt-chimera"});
  EXPECT_EQ(ambiguous.exit_code, 2);
  EXPECT_THAT(ambiguous.err, HasSubstr("names 2 jobs"));
  EXPECT_THAT(ambiguous.err, HasSubstr(first));
  EXPECT_THAT(ambiguous.err, HasSubstr(second));
  // Nothing was stopped, and the full id still works.
  EXPECT_THAT(Chimera({"list"}).out, ::testing::Not(HasSubstr("STOPPED")));
  EXPECT_EQ(Chimera({"stop", second}).exit_code, 0);
}

TEST_F(CliJobsTest, ListSelectsJobsByLabel) {
  const absl::StatusOr<std::string> example =
      ReadTextFile(std::string(CHIMERA_SOURCE_DIR) + "/examples/chimera.yaml", 1 << 20);
  ASSERT_TRUE(example.ok()) << example.status();
  std::string labelled = *example;
  const std::string name = "  name: gpt-chimera\n";
  ASSERT_NE(labelled.find(name), std::string::npos);
  labelled.replace(labelled.find(name), name.size(), name + "  labels: {team: nlp}\n");
  const std::string nlp = std::string(absl::StripAsciiWhitespace(
      Chimera({"submit", "-f", dir_.WriteFile("nlp.yaml", labelled), "--no-wait"}).out));
  const std::string other = std::string(absl::StripAsciiWhitespace(
      Chimera({"submit", "-f", "examples/chimera.yaml", "--no-wait"}).out));

  const auto ids = [&](const std::string& selector) {
    ProcessResult list = Chimera({"list", "-l", selector, "-o", "json"});
    EXPECT_EQ(list.exit_code, 0) << selector << ": " << list.err;
    const nlohmann::json listed = nlohmann::json::parse(list.out);
    std::vector<std::string> found;
    for (const auto& job : listed.value("jobs", nlohmann::json::array())) {
      found.push_back(job["id"]);
    }
    return found;
  };
  EXPECT_EQ(ids("team=nlp"), std::vector<std::string>{nlp});
  EXPECT_EQ(ids("!team"), std::vector<std::string>{other});
  EXPECT_EQ(ids("team!=nlp"), std::vector<std::string>{other});
  ProcessResult bad = Chimera({"list", "-l", "te am=nlp"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("-l: 'te am=nlp'"));
}

// Ctrl-C while following stops the CLI, not the job, and says so.
TEST_F(CliJobsTest, InterruptedSubmitSaysTheJobKeepsRunningAndHowToStopIt) {
  net::ChildProcess submit({CHIMERA_BINARY, "submit", "-f", "examples/chimera.yaml",
                            "--address", coordinator_->address()},
                           CHIMERA_SOURCE_DIR);
  const absl::StatusOr<std::string> line = submit.ReadLine(absl::Seconds(30));
  ASSERT_TRUE(line.ok()) << line.status() << submit.err();
  absl::string_view id_view(*line);
  ASSERT_TRUE(absl::ConsumePrefix(&id_view, "job ") &&
              absl::ConsumeSuffix(&id_view, " submitted"))
      << *line;
  const std::string id(id_view);
  submit.Signal(SIGINT);
  EXPECT_EQ(submit.Wait(absl::Seconds(10)), 130);
  EXPECT_THAT(submit.err(), HasSubstr("job " + id + " keeps running"));
  EXPECT_THAT(submit.err(), HasSubstr("chimera stop " + id));
  ProcessResult status = Chimera({"status", id, "-o", "json"});
  EXPECT_EQ(nlohmann::json::parse(status.out)["status"]["state"], "JOB_STATE_PENDING");
}

// A described job reads like a job file: lowerCamelCase fields, RFC 3339
// times; -o yaml says the same as -o json, and -o wide adds columns.
TEST_F(CliJobsTest, OutputFormatsUseTheJobFilesNamesAndRfc3339Times) {
  ProcessResult submit = Chimera({"submit", "-f", "examples/chimera.yaml", "--no-wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = std::string(absl::StripAsciiWhitespace(submit.out));

  const nlohmann::json job = nlohmann::json::parse(Chimera({"status", id, "-o", "json"}).out);
  EXPECT_EQ(job["manifest"]["apiVersion"], "chimera.dev/v1alpha1");
  EXPECT_EQ(job["manifest"]["spec"]["training"]["globalBatchSize"], 8);
  const std::string submitted = job["status"]["submitTime"];
  EXPECT_TRUE(std::regex_match(submitted,
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
      << submitted;
  EXPECT_FALSE(job["status"].contains("endTime")) << "a time not reached is left out";

  ProcessResult yaml = Chimera({"describe", id, "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, HasSubstr("apiVersion: chimera.dev/v1alpha1"));
  EXPECT_THAT(yaml.out, HasSubstr("submitTime: " + submitted));

  ProcessResult wide = Chimera({"list", "-o", "wide"});
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_THAT(wide.out, HasSubstr("MICRO-BATCHES"));
  EXPECT_THAT(wide.out, HasSubstr(id));
  ProcessResult workers = Chimera({"workers", "-o", "wide"});
  EXPECT_THAT(workers.out, HasSubstr("INCARNATION"));
  EXPECT_EQ(Chimera({"list", "-o", "xml"}).exit_code, 2);
}

// kubectl get -w: the list, then the list again whenever a job changes.
TEST_F(CliJobsTest, ListWatchShowsAJobSubmittedWhileItWatches) {
  net::ChildProcess watch({CHIMERA_BINARY, "list", "--watch", "-o", "json", "--address",
                           coordinator_->address()});
  absl::StatusOr<std::string> line = watch.ReadLine(absl::Seconds(30));
  ASSERT_TRUE(line.ok()) << line.status() << watch.err();
  EXPECT_EQ(nlohmann::json::parse(*line)["jobs"].size(), 0u);
  ProcessResult submit = Chimera({"submit", "-f", "examples/chimera.yaml", "--no-wait"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = std::string(absl::StripAsciiWhitespace(submit.out));
  line = watch.ReadLine(absl::Seconds(30));
  ASSERT_TRUE(line.ok()) << line.status() << watch.err();
  const nlohmann::json listed = nlohmann::json::parse(*line);
  ASSERT_EQ(listed["jobs"].size(), 1u) << *line;
  EXPECT_EQ(listed["jobs"][0]["id"], id);
  watch.Signal(SIGINT);
  EXPECT_EQ(watch.Wait(absl::Seconds(10)), 128 + SIGINT);
}

TEST_F(CliJobsTest, UnknownJobIsOneClearLineAndExitOne) {
  ProcessResult status = Chimera({"status", "nope"});
  EXPECT_EQ(status.exit_code, 1);
  EXPECT_EQ(status.err,
            "chimera: NOT_FOUND: no job 'nope' (by id, name, or the start of "
            "an id)\n");
}

TEST_F(CliJobsTest, InvalidJobFileIsRejectedBeforeSubmitting) {
  chimera::testing::TempDir dir;
  const std::string file = dir.WriteFile("bad.yaml", "apiVersion: chimera.dev/v1alpha1\nkind: TrainJob\n");
  ProcessResult submit = Chimera({"submit", "-f", file});
  EXPECT_EQ(submit.exit_code, 2);
  EXPECT_THAT(submit.err, HasSubstr(file + ": spec: is required"));
  EXPECT_THAT(Chimera({"list"}).out, ::testing::Not(HasSubstr("PENDING")));
  // A replication that does not divide the micro-batch names its field.
  const absl::StatusOr<std::string> dapple = ReadTextFile(
      std::string(CHIMERA_SOURCE_DIR) + "/examples/dapple.yaml", 1 << 20);
  ASSERT_TRUE(dapple.ok()) << dapple.status();
  const std::string replicated = dir.WriteFile(
      "replicated.yaml",
      absl::StrReplaceAll(*dapple,
                          {{"replication: \"2:1\"", "replication: \"3:1\""},
                           {"workers: 3", "workers: 4"},
                           {"microBatchSize: 4", "microBatchSize: 2"}}));
  submit = Chimera({"submit", "-f", replicated});
  EXPECT_EQ(submit.exit_code, 2);
  EXPECT_THAT(submit.err, HasSubstr("spec.training.microBatchSize: 2 does not "
                                    "split into the 3 slices of replication "
                                    "3:1"));
}

TEST_F(CliJobsTest, UnreachableCoordinatorSaysWhere) {
  ProcessResult list = RunProcess({CHIMERA_BINARY, "list", "--address", "127.0.0.1:1",
                                   "--timeout", "2"});
  EXPECT_EQ(list.exit_code, 1);
  EXPECT_THAT(list.err, HasSubstr("127.0.0.1:1"));
}

TEST_F(CliJobsTest, AddressWithoutPortOrWithSchemeIsAUsageError) {
  for (const char* address :
       {"127.0.0.1", "http://127.0.0.1:50051", "localhost:0"}) {
    ProcessResult list =
        RunProcess({CHIMERA_BINARY, "list", "--address", address});
    EXPECT_EQ(list.exit_code, 2) << address << ": " << list.err;
    EXPECT_THAT(list.err, HasSubstr("--address")) << address;
    EXPECT_THAT(list.err, HasSubstr(address)) << address;
  }
}

TEST_F(CliJobsTest, HealthAsksTheCoordinatorOverGrpc) {
  ProcessResult health = Chimera({"health"});
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_THAT(health.out, HasSubstr("serving"));
  ProcessResult down = RunProcess(
      {CHIMERA_BINARY, "health", "--address", "127.0.0.1:1", "--timeout", "2"});
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_THAT(down.err, HasSubstr("127.0.0.1:1"));
}

TEST(CliHealthTest, HttpAsksADaemonsHealthzAndFailsWhenNothingServes) {
  chimera::testing::TempDir dir;
  absl::StatusOr<CoordinatorProcess> coordinator = CoordinatorProcess::Start(
      CHIMERA_COORDINATOR_BINARY, {"--db", dir.path() + "/jobs.db",
                                   "--metrics-listen", "127.0.0.1:0"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  absl::StatusOr<std::string> metrics = chimera::testing::AwaitAnnouncedAddress(
      coordinator->process(), "metrics on ");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  ProcessResult health = RunProcess({CHIMERA_BINARY, "health", "--http", *metrics});
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_THAT(health.out, HasSubstr("ok"));
  EXPECT_EQ(coordinator->Stop(), 0);

  ProcessResult gone = RunProcess({CHIMERA_BINARY, "health", "--http", *metrics});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr(*metrics));
  ProcessResult malformed = RunProcess({CHIMERA_BINARY, "health", "--http", "nowhere"});
  EXPECT_EQ(malformed.exit_code, 2) << malformed.err;
}

TEST_F(CliJobsTest, WorkersListIsEmptyWithoutWorkers) {
  ProcessResult workers = Chimera({"workers", "-o", "json"});
  ASSERT_EQ(workers.exit_code, 0) << workers.err;
  EXPECT_EQ(nlohmann::json::parse(workers.out)["workers"].size(), 0u);
}

}  // namespace
}  // namespace chimera
