// The Grafana dashboards and Prometheus rules under dashboards/ against the
// real thing: a coordinator and two worker daemons run a job while a real
// Prometheus scrapes them the way a default install does (one scrape job for
// the coordinator, one for the workers, no relabelling) with
// dashboards/rules loaded. Every panel query, with the dashboard's
// variables filled in as Grafana would, must answer with a series, and so
// must every recording rule. The panels in a dashboard's "GPU" row show the
// NVIDIA DCGM exporter's series, which a cluster without GPUs lacks: their
// queries need only be valid.
#include <signal.h>

#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/coordinator_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_file.h"
#include "net/http_get.h"
#include "tests/support/coordinator_process.h"
#include "tests/support/dashboard.h"
#include "tests/support/free_port.h"
#include "tests/support/prometheus_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/worker_process.h"

namespace chimera {
namespace {

using ::chimera::net::HttpGet;
using ::chimera::testing::AwaitAnnouncedAddress;
using ::chimera::testing::CoordinatorProcess;
using ::chimera::testing::DashboardPanel;
using ::chimera::testing::FreePort;
using ::nlohmann::json;
using ::testing::IsEmpty;

constexpr absl::Duration kStartTimeout = absl::Seconds(30);
constexpr absl::Duration kJobStartTimeout = absl::Seconds(60);
// How long the queries get, all together, to answer once the job runs: the
// one-minute rates of the recording rules need two scrapes, the job a few
// steps. Everything missing fails the test after this long.
constexpr absl::Duration kQueryTimeout = absl::Seconds(90);
constexpr absl::Duration kPollPeriod = absl::Seconds(1);

constexpr char kCoordinatorScrapeJob[] = "chimera-coordinator";
constexpr char kWorkersScrapeJob[] = "chimera-workers";

// What Grafana puts for its built-in interval variables; 30 s spans many of
// the test's one-second scrapes.
const std::map<std::string, std::string>& BuiltInValues() {
  static const auto* values = new std::map<std::string, std::string>{
      {"__rate_interval", "30s"}, {"__interval", "15s"}, {"__range", "5m"}};
  return *values;
}

// One query to ask Prometheus until it answers: a panel's or a recording
// rule's.
struct Query {
  std::string where;  // "chimera-job.json / Loss", "recording rule"
  std::string expr;
  bool valid_is_enough = false;  // a DCGM panel: no series on a CPU cluster
  std::string last_answer;
};

class DashboardsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<CoordinatorProcess> coordinator = CoordinatorProcess::Start(
        CHIMERA_COORDINATOR_BINARY,
        {"--db", ":memory:", "--metrics-listen", "127.0.0.1:0"});
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    absl::StatusOr<std::string> metrics =
        AwaitAnnouncedAddress(coordinator_->process(), "metrics on ");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    client::ConnectionOptions options;
    options.address = coordinator_->address();
    client_ = *client::CoordinatorClient::Connect(options);

    std::vector<std::string> worker_metrics;
    for (int i = 0; i < 2; ++i) {
      worker_metrics.push_back(absl::StrCat("127.0.0.1:", FreePort()));
      workers_.push_back(testing::StartWorkerDaemon(
          {.binary = CHIMERA_WORKER_BINARY,
           .coordinator = coordinator_->address(),
           .worker_id = absl::StrCat("w", i),
           .work_dir = absl::StrCat(dir_.path(), "/w", i),
           .flags = {"--metrics-listen", worker_metrics.back()},
           .working_dir = CHIMERA_SOURCE_DIR,
           .log_file = absl::StrCat(dir_.path(), "/w", i, ".log")}));
    }

    const std::string rules =
        absl::StrCat(CHIMERA_SOURCE_DIR, "/dashboards/rules/");
    const std::string config = dir_.WriteFile(
        "prometheus.yml",
        absl::StrCat("global: {scrape_interval: 1s, evaluation_interval: 1s}\n",
                     "rule_files: ['", rules, "recording.yaml', '", rules,
                     "alerts.yaml']\n", "scrape_configs:\n",
                     "  - job_name: ", kCoordinatorScrapeJob, "\n",
                     "    static_configs: [{targets: ['", *metrics, "']}]\n",
                     "  - job_name: ", kWorkersScrapeJob, "\n",
                     "    static_configs: [{targets: ['",
                     absl::StrJoin(worker_metrics, "', '"), "']}]\n"));
    absl::StatusOr<std::unique_ptr<testing::PrometheusProcess>> prometheus =
        testing::PrometheusProcess::Start(config, dir_.path(), kStartTimeout);
    ASSERT_TRUE(prometheus.ok()) << prometheus.status();
    prometheus_ = *std::move(prometheus);
  }

  void TearDown() override {
    prometheus_.reset();
    testing::StopProcesses(workers_);
  }

  // Prometheus' answer to an instant query, parsed; an error when it cannot
  // be had (an invalid query answers 400 with its error).
  absl::StatusOr<json> Ask(const std::string& expr) {
    absl::StatusOr<std::string> body =
        prometheus_->Query(expr);
    if (!body.ok()) return body.status();
    json answer = json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (answer.is_discarded()) {
      return absl::InternalError(absl::StrCat("not JSON: ", *body));
    }
    return answer;
  }

  // The values of a variable defined as label_values(METRIC, LABEL), as
  // Grafana would list them, once there are some (or none past deadline_).
  std::vector<std::string> LabelValues(const std::string& definition) {
    static const std::regex kLabelValues(
        R"(label_values\(\s*([^,]+?)\s*,\s*(\w+)\s*\))");
    std::smatch match;
    EXPECT_TRUE(std::regex_match(definition, match, kLabelValues))
        << "not label_values(METRIC, LABEL): " << definition;
    if (match.empty()) return {};
    const std::string label = match[2];
    const std::string expr =
        absl::StrCat("count by (", label, ") (", std::string(match[1]), ")");
    std::vector<std::string> values;
    while (values.empty() && absl::Now() < deadline_) {
      absl::StatusOr<json> answer = Ask(expr);
      if (answer.ok()) {
        for (const json& series : (*answer)["data"]["result"]) {
          values.push_back(series["metric"].value(label, ""));
        }
      }
      if (values.empty()) absl::SleepFor(kPollPeriod);
    }
    return values;
  }

  // The dashboard's queries with its variables filled in: the job's id for
  // train_job, the one value Prometheus lists for any other variable.
  std::vector<Query> DashboardQueries(const std::string& file,
                                      const std::string& job_id) {
    absl::StatusOr<json> dashboard = testing::LoadJsonFile(
        absl::StrCat(CHIMERA_SOURCE_DIR, "/dashboards/", file));
    EXPECT_TRUE(dashboard.ok()) << dashboard.status();
    if (!dashboard.ok()) return {};
    std::map<std::string, std::string> values = BuiltInValues();
    for (const json& variable : (*dashboard)["templating"]["list"]) {
      if (variable.value("type", "") != "query") continue;
      const std::string name = variable.value("name", "");
      const std::vector<std::string> listed =
          LabelValues(variable["query"].value("query", ""));
      if (name == "train_job") {
        EXPECT_THAT(listed, ::testing::Contains(job_id))
            << file << ": $" << name;
        values[name] = job_id;
      } else {
        EXPECT_EQ(listed.size(), 1u) << file << ": $" << name << " lists "
                                     << absl::StrJoin(listed, ", ");
        values[name] = listed.empty() ? "" : listed.front();
      }
    }
    std::vector<Query> queries;
    for (const DashboardPanel& entry : testing::PanelsOf(*dashboard)) {
      for (const std::string& expr : testing::QueriesOf(entry.panel)) {
        queries.push_back({absl::StrCat(file, " / ", entry.row, " / ",
                                        entry.panel.value("title", "")),
                           testing::SubstituteVariables(expr, values),
                           testing::IsGpuRow(entry.row), ""});
      }
    }
    return queries;
  }

  // Every recording rule's series, by its name.
  static std::vector<Query> RecordingRuleQueries() {
    std::ifstream rules(
        absl::StrCat(CHIMERA_SOURCE_DIR, "/dashboards/rules/recording.yaml"));
    static const std::regex kRecord(R"(^\s*-\s*record:\s*(\S+)\s*$)");
    std::vector<Query> queries;
    std::string line;
    std::smatch match;
    while (std::getline(rules, line)) {
      if (std::regex_match(line, match, kRecord)) {
        queries.push_back({"recording rule", match[1], false, ""});
      }
    }
    EXPECT_FALSE(queries.empty()) << "no record: in recording.yaml";
    return queries;
  }

  // Asks each query until it answers as it must or deadline_ passes;
  // returns those that never did.
  std::vector<Query> Unanswered(std::vector<Query> pending) {
    while (!pending.empty()) {
      std::vector<Query> still;
      for (Query& query : pending) {
        absl::StatusOr<json> answer = Ask(query.expr);
        if (!answer.ok()) {
          query.last_answer = answer.status().ToString();
        } else if ((*answer)["status"] != "success") {
          query.last_answer = answer->dump();
        } else if (query.valid_is_enough ||
                   !(*answer)["data"]["result"].empty()) {
          continue;
        } else {
          query.last_answer = "no series";
        }
        still.push_back(query);
      }
      pending = std::move(still);
      if (pending.empty() || absl::Now() >= deadline_) break;
      absl::SleepFor(kPollPeriod);
    }
    return pending;
  }

  // The rules Prometheus could not evaluate, with their errors.
  std::vector<std::string> BrokenRules() {
    absl::StatusOr<std::string> body =
        HttpGet(prometheus_->address(), "/api/v1/rules");
    if (!body.ok()) return {body.status().ToString()};
    std::vector<std::string> broken;
    // Named: a range-for over a part of a temporary reads it once freed.
    json rules = json::parse(*body);
    for (const json& group : rules["data"]["groups"]) {
      for (const json& rule : group["rules"]) {
        if (rule.value("health", "") == "err") {
          broken.push_back(absl::StrCat(rule.value("name", ""), ": ",
                                        rule.value("lastError", "")));
        }
      }
    }
    return broken;
  }

  chimera::testing::TempDir dir_;
  std::optional<CoordinatorProcess> coordinator_;
  std::unique_ptr<client::CoordinatorClient> client_;
  std::vector<std::unique_ptr<net::ChildProcess>> workers_;
  std::unique_ptr<testing::PrometheusProcess> prometheus_;
  // When the queries, variables' included, must have answered.
  absl::Time deadline_ = absl::InfiniteFuture();
};

TEST_F(DashboardsTest, EveryPanelQueryAndRecordingRuleAnswersWhileAJobRuns) {
  absl::StatusOr<chimera::v1::TrainJob> job = jobspec::LoadJobFile(
      absl::StrCat(CHIMERA_SOURCE_DIR, "/examples/chimera.yaml"),
      chimera::jobspec::SpecOnly());
  ASSERT_TRUE(job.ok()) << job.status();
  job->mutable_spec()->mutable_parallelism()->set_pipeline(2);
  job->mutable_spec()->mutable_resources()->set_workers(2);
  job->mutable_spec()->mutable_training()->set_max_steps(100000);
  absl::StatusOr<chimera::v1::Job> submitted = client_->Submit(*job);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->id();

  const absl::Time deadline = absl::Now() + kJobStartTimeout;
  absl::StatusOr<chimera::v1::Job> state = client_->Get(id);
  while (state.ok() &&
         state->status().state() == chimera::v1::JOB_STATE_PENDING &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
    state = client_->Get(id);
  }
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->status().state(), chimera::v1::JOB_STATE_RUNNING)
      << state->status().message();

  deadline_ = absl::Now() + kQueryTimeout;
  std::vector<Query> queries = DashboardQueries("chimera-job.json", id);
  for (Query& query : DashboardQueries("chimera-cluster.json", id)) {
    queries.push_back(std::move(query));
  }
  for (Query& query : RecordingRuleQueries())
    queries.push_back(std::move(query));

  std::vector<std::string> failures;
  for (const Query& query : Unanswered(queries)) {
    failures.push_back(absl::StrCat(query.where, ": ", query.expr, "\n    -> ",
                                    query.last_answer));
  }
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << queries.size()
                                << " queries never answered as they must:\n  "
                                << absl::StrJoin(failures, "\n  ");
  EXPECT_THAT(BrokenRules(), IsEmpty());

  // Still running: the dashboards were looked at while it trained.
  state = client_->Get(id);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->status().state(), chimera::v1::JOB_STATE_RUNNING)
      << state->status().message();
  EXPECT_TRUE(client_->Stop(id).ok());
}

}  // namespace
}  // namespace chimera
