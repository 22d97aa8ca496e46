// The Grafana dashboards under dashboards/ work when provisioned or imported
// as they are: every panel has a place, a datasource, a unit and a query, and
// every variable a query uses is defined. The checker itself is shown to
// find each kind of problem on a broken dashboard.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/dashboard.h"

namespace chimera::testing {
namespace {

using ::nlohmann::json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

json Dashboard(const std::string& file) {
  absl::StatusOr<json> dashboard =
      LoadJsonFile(std::string(CHIMERA_SOURCE_DIR) + "/dashboards/" + file);
  EXPECT_TRUE(dashboard.ok()) << dashboard.status();
  return dashboard.ok() ? *dashboard : json::object();
}

class DashboardFileTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DashboardFileTest, EveryPanelHasPlaceDatasourceUnitAndDefinedQueries) {
  const json dashboard = Dashboard(GetParam());
  EXPECT_THAT(DashboardProblems(dashboard), IsEmpty());
  EXPECT_GT(PanelsOf(dashboard).size(), 5u);
}

// The integration test tells DCGM-only panels apart by their row: every
// query of the DCGM exporter's series sits in a "GPU" row, and nothing else
// does.
TEST_P(DashboardFileTest, DcgmQueriesLiveInTheGpuRowAlone) {
  int gpu_panels = 0;
  for (const DashboardPanel& entry : PanelsOf(Dashboard(GetParam()))) {
    if (IsGpuRow(entry.row)) ++gpu_panels;
    for (const std::string& query : QueriesOf(entry.panel)) {
      EXPECT_EQ(IsGpuRow(entry.row), query.find("DCGM_") != std::string::npos)
          << entry.panel.value("title", "") << ": " << query;
    }
  }
  EXPECT_GT(gpu_panels, 0);
}

INSTANTIATE_TEST_SUITE_P(Dashboards, DashboardFileTest,
                         ::testing::Values("chimera-job.json",
                                           "chimera-cluster.json"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           name = name.substr(0, name.find('.'));
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

TEST(DashboardJsonTest, StableUidsLinkTheDashboards) {
  EXPECT_EQ(Dashboard("chimera-job.json").value("uid", ""), "chimera-job");
  EXPECT_EQ(Dashboard("chimera-cluster.json").value("uid", ""),
            "chimera-cluster");
}

TEST(DashboardJsonTest, JobVariableListsTheRunningJobs) {
  const json variables = Dashboard("chimera-job.json")["templating"]["list"];
  bool found = false;
  for (const json& variable : variables) {
    if (variable.value("name", "") != "train_job") continue;
    found = true;
    EXPECT_EQ(variable["query"]["query"],
              "label_values(chimera_job_plan_info, train_job)");
  }
  EXPECT_TRUE(found);
}

TEST(DashboardJsonTest, ProblemsNameEachBrokenPanel) {
  const json broken = json::parse(R"json({
    "uid": "broken", "title": "Broken", "__inputs": [],
    "templating": {"list": [
      {"name": "datasource", "type": "datasource", "query": "prometheus"}]},
    "panels": [
      {"type": "row", "id": 1, "title": "Row", "gridPos": {"h": 1, "w": 24, "x": 0, "y": 0}},
      {"type": "timeseries", "id": 2, "title": "No unit",
       "datasource": {"type": "prometheus", "uid": "${datasource}"},
       "gridPos": {"h": 8, "w": 12, "x": 0, "y": 1},
       "fieldConfig": {"defaults": {}},
       "targets": [{"refId": "A", "expr": "up"}]},
      {"type": "stat", "id": 2, "title": "Duplicate id, no query",
       "datasource": {"type": "prometheus", "uid": "${datasource}"},
       "gridPos": {"h": 8, "w": 12, "x": 12, "y": 1},
       "fieldConfig": {"defaults": {"unit": "s"}},
       "targets": [{"refId": "A", "expr": ""}]},
      {"type": "stat", "id": 4, "title": "Undefined variable",
       "datasource": {"type": "prometheus", "uid": "${source}"},
       "gridPos": {"h": 8, "w": 20, "x": 10},
       "fieldConfig": {"defaults": {"unit": "s"}},
       "targets": [{"refId": "A",
                    "expr": "rate(x{train_job=\"$train_job\"}[$__rate_interval])"}]},
      {"type": "row", "id": 5, "title": "GPU", "collapsed": true,
       "gridPos": {"h": 1, "w": 24, "x": 0, "y": 9},
       "panels": [{"type": "stat", "id": 6, "title": "No datasource, no targets",
                   "gridPos": {"h": 8, "w": 12, "x": 0, "y": 10},
                   "fieldConfig": {"defaults": {"unit": "percent"}}}]}
    ]})json");
  EXPECT_THAT(
      DashboardProblems(broken),
      UnorderedElementsAre(
          "has __inputs: it would need importing by hand",
          "panel 2 \"No unit\": no unit (fieldConfig.defaults.unit)",
          "panel 2 \"Duplicate id, no query\": id used twice",
          "panel 2 \"Duplicate id, no query\": empty query",
          "panel 4 \"Undefined variable\": no gridPos.y",
          "panel 4 \"Undefined variable\": wider than the 24-column grid",
          "panel 4 \"Undefined variable\": datasource uses undefined $source",
          "panel 4 \"Undefined variable\": query uses undefined $train_job",
          "panel 6 \"No datasource, no targets\": no datasource uid",
          "panel 6 \"No datasource, no targets\": no query"));
  EXPECT_THAT(PanelsOf(broken).back().row, "GPU");
}

TEST(DashboardJsonTest, VariablesInFindsGrafanaReferencesNotRegexGroups) {
  EXPECT_THAT(
      VariablesIn("a{j=\"$train_job\"}[${__rate_interval}] "
                  "${x:csv} [[y]] label_replace(v, \"d\", \"rank $1\")"),
      ElementsAre("train_job", "__rate_interval", "x", "y"));
}

TEST(DashboardJsonTest, SubstituteVariablesFillsTheNamedOnes) {
  EXPECT_EQ(
      SubstituteVariables("x{j=\"$train_job\"}[$__rate_interval] $other $1",
                          {{"train_job", "job-1"}, {"__rate_interval", "30s"}}),
      "x{j=\"job-1\"}[30s] $other $1");
  EXPECT_EQ(SubstituteVariables("up{job=\"${coordinator_job}\"}",
                                {{"coordinator_job", "c"}}),
            "up{job=\"c\"}");
}

}  // namespace
}  // namespace chimera::testing
