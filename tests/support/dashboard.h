// Reading the Grafana dashboards under dashboards/ for the tests that check
// them: their panels with the row each sits in, the Grafana variables their
// queries use, the queries with variables filled in, and what makes a panel
// incomplete.
//
//   absl::StatusOr<nlohmann::json> dashboard = LoadJsonFile(path);
//   for (const DashboardPanel& p : PanelsOf(*dashboard)) {
//     if (IsGpuRow(p.row)) continue;
//     for (const std::string& expr : QueriesOf(p.panel)) ...
//   }
#ifndef CHIMERA_TESTS_SUPPORT_DASHBOARD_H_
#define CHIMERA_TESTS_SUPPORT_DASHBOARD_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace chimera::testing {

// The file at `path` parsed as JSON; an error naming the file when it cannot
// be read or parsed.
absl::StatusOr<nlohmann::json> LoadJsonFile(const std::string& path);

// A panel that shows data (not a row) and the title of the row it belongs
// to: the row it is nested in when that row is collapsed, else the last row
// above it ("" above the first row).
struct DashboardPanel {
  nlohmann::json panel;
  std::string row;
};

// Every panel of `dashboard` in order, rows left out.
std::vector<DashboardPanel> PanelsOf(const nlohmann::json& dashboard);

// The marker for panels that show the NVIDIA DCGM exporter's series, which
// exist only on GPU clusters: they live in a row whose title starts with
// "GPU".
bool IsGpuRow(absl::string_view row_title);

// The PromQL queries of `panel` (its targets' expr), in order; "" for a
// target without one.
std::vector<std::string> QueriesOf(const nlohmann::json& panel);

// Grafana's variables that need no definition: $__rate_interval and the
// like.
bool IsBuiltInVariable(absl::string_view name);

// The names of the Grafana variables `text` refers to as $name, ${name},
// ${name:format} or [[name]]. $1 and the like are not variables (PromQL's
// label_replace writes regex groups so, and Grafana leaves them alone).
std::vector<std::string> VariablesIn(absl::string_view text);

// `text` with each variable reference that `values` names replaced by its
// value; other references stay as they are.
std::string SubstituteVariables(
    absl::string_view text, const std::map<std::string, std::string>& values);

// What keeps `dashboard` from working when provisioned or imported as it
// is, one line per problem, each naming the panel: an __inputs section, no
// uid or title, duplicate panel ids, a panel without gridPos, datasource,
// unit (fieldConfig.defaults.unit) or query, an undefined variable. Empty
// when there is none.
std::vector<std::string> DashboardProblems(const nlohmann::json& dashboard);

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_DASHBOARD_H_
