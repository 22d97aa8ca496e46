#include "tests/support/dashboard.h"

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace chimera::testing {
namespace {

using ::nlohmann::json;

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// One variable reference found in a text: where it starts, how long it is
// and the variable's name.
struct Reference {
  size_t start;
  size_t length;
  std::string name;
};

std::vector<Reference> ReferencesIn(absl::string_view text) {
  std::vector<Reference> references;
  size_t i = 0;
  while (i < text.size()) {
    size_t name_start = 0, name_end = 0, end = 0;
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '{') {
      end = text.find('}', i + 2);
      if (end == absl::string_view::npos) break;
      name_start = i + 2;
      name_end = name_start;
      while (name_end < end && IsNameChar(text[name_end])) ++name_end;
      ++end;
    } else if (text[i] == '$') {
      name_start = name_end = i + 1;
      while (name_end < text.size() && IsNameChar(text[name_end])) ++name_end;
      end = name_end;
    } else if (absl::StartsWith(text.substr(i), "[[")) {
      end = text.find("]]", i + 2);
      if (end == absl::string_view::npos) break;
      name_start = name_end = i + 2;
      while (name_end < end && IsNameChar(text[name_end])) ++name_end;
      end += 2;
    } else {
      ++i;
      continue;
    }
    if (name_end > name_start &&
        !std::isdigit(static_cast<unsigned char>(text[name_start]))) {
      references.push_back(
          {i, end - i,
           std::string(text.substr(name_start, name_end - name_start))});
      i = end;
    } else {
      ++i;
    }
  }
  return references;
}

std::string PanelName(const json& panel) {
  return absl::StrCat("panel ", panel.value("id", json()).dump(), " \"",
                      panel.value("title", std::string()), "\"");
}

// A panel's or a target's datasource: problems with it, appended to
// `problems` under `where`.
void CheckDatasource(const json& datasource,
                     const std::set<std::string>& defined,
                     const std::string& where,
                     std::vector<std::string>& problems) {
  if (!datasource.is_object() || !datasource.contains("uid") ||
      !datasource["uid"].is_string() ||
      datasource["uid"].get<std::string>().empty()) {
    problems.push_back(absl::StrCat(where, ": no datasource uid"));
    return;
  }
  for (const std::string& name :
       VariablesIn(datasource["uid"].get<std::string>())) {
    if (!defined.count(name)) {
      problems.push_back(
          absl::StrCat(where, ": datasource uses undefined $", name));
    }
  }
}

}  // namespace

absl::StatusOr<json> LoadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  json parsed = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not valid JSON"));
  }
  return parsed;
}

std::vector<DashboardPanel> PanelsOf(const json& dashboard) {
  std::vector<DashboardPanel> panels;
  std::string row;
  for (const json& panel : dashboard.value("panels", json::array())) {
    if (panel.value("type", "") != "row") {
      panels.push_back({panel, row});
      continue;
    }
    row = panel.value("title", "");
    for (const json& nested : panel.value("panels", json::array())) {
      panels.push_back({nested, row});
    }
  }
  return panels;
}

bool IsGpuRow(absl::string_view row_title) {
  return absl::StartsWith(row_title, "GPU");
}

std::vector<std::string> QueriesOf(const json& panel) {
  std::vector<std::string> queries;
  for (const json& target : panel.value("targets", json::array())) {
    const json expr = target.value("expr", json());
    queries.push_back(expr.is_string() ? expr.get<std::string>() : "");
  }
  return queries;
}

bool IsBuiltInVariable(absl::string_view name) {
  static const std::set<absl::string_view> kBuiltIns = {
      "__rate_interval", "__interval", "__interval_ms", "__range",
      "__range_s",       "__range_ms", "__from",        "__to",
      "__dashboard",     "__org",      "__user",        "__timeFilter"};
  return kBuiltIns.count(name) > 0;
}

std::vector<std::string> VariablesIn(absl::string_view text) {
  std::vector<std::string> names;
  for (const Reference& reference : ReferencesIn(text)) {
    names.push_back(reference.name);
  }
  return names;
}

std::string SubstituteVariables(
    absl::string_view text, const std::map<std::string, std::string>& values) {
  std::string out;
  size_t copied = 0;
  for (const Reference& reference : ReferencesIn(text)) {
    auto value = values.find(reference.name);
    if (value == values.end()) continue;
    absl::StrAppend(&out, text.substr(copied, reference.start - copied),
                    value->second);
    copied = reference.start + reference.length;
  }
  absl::StrAppend(&out, text.substr(copied));
  return out;
}

std::vector<std::string> DashboardProblems(const json& dashboard) {
  std::vector<std::string> problems;
  if (dashboard.contains("__inputs")) {
    problems.push_back("has __inputs: it would need importing by hand");
  }
  for (const char* field : {"uid", "title"}) {
    if (!dashboard.value(field, json()).is_string() ||
        dashboard[field].get<std::string>().empty()) {
      problems.push_back(absl::StrCat("no ", field));
    }
  }

  std::set<std::string> defined;
  const json variables = dashboard.value("templating", json::object())
                             .value("list", json::array());
  for (const json& variable : variables) {
    defined.insert(variable.value("name", ""));
  }
  for (const json& variable : variables) {
    const std::string where =
        absl::StrCat("variable ", variable.value("name", ""));
    if (variable.value("type", "") != "query") continue;
    CheckDatasource(variable.value("datasource", json()), defined, where,
                    problems);
    const json query = variable.value("query", json());
    const std::string text = query.is_object()   ? query.value("query", "")
                             : query.is_string() ? query.get<std::string>()
                                                 : "";
    if (text.empty()) problems.push_back(absl::StrCat(where, ": no query"));
    for (const std::string& name : VariablesIn(text)) {
      if (!defined.count(name) && !IsBuiltInVariable(name)) {
        problems.push_back(absl::StrCat(where, ": uses undefined $", name));
      }
    }
  }

  std::set<int> ids;
  auto check_id = [&](const json& panel) {
    const json id = panel.value("id", json());
    if (!id.is_number_integer()) {
      problems.push_back(absl::StrCat(PanelName(panel), ": no id"));
    } else if (!ids.insert(id.get<int>()).second) {
      problems.push_back(absl::StrCat(PanelName(panel), ": id used twice"));
    }
  };
  for (const json& panel : dashboard.value("panels", json::array())) {
    if (panel.value("type", "") == "row") check_id(panel);
  }

  for (const DashboardPanel& entry : PanelsOf(dashboard)) {
    const json& panel = entry.panel;
    const std::string name = PanelName(panel);
    check_id(panel);
    const json grid = panel.value("gridPos", json());
    for (const char* field : {"h", "w", "x", "y"}) {
      if (!grid.is_object() || !grid.value(field, json()).is_number_integer()) {
        problems.push_back(absl::StrCat(name, ": no gridPos.", field));
      }
    }
    if (grid.is_object() && grid.value("x", 0) + grid.value("w", 0) > 24) {
      problems.push_back(absl::StrCat(name, ": wider than the 24-column grid"));
    }
    CheckDatasource(panel.value("datasource", json()), defined, name, problems);
    const json unit = panel.value("fieldConfig", json::object())
                          .value("defaults", json::object())
                          .value("unit", json());
    if (!unit.is_string() || unit.get<std::string>().empty()) {
      problems.push_back(
          absl::StrCat(name, ": no unit (fieldConfig.defaults.unit)"));
    }
    const std::vector<std::string> queries = QueriesOf(panel);
    if (queries.empty()) problems.push_back(absl::StrCat(name, ": no query"));
    for (const json& target : panel.value("targets", json::array())) {
      if (target.contains("datasource")) {
        CheckDatasource(
            target["datasource"], defined,
            absl::StrCat(name, " target ", target.value("refId", "")),
            problems);
      }
    }
    for (const std::string& query : queries) {
      if (query.empty())
        problems.push_back(absl::StrCat(name, ": empty query"));
      for (const std::string& variable : VariablesIn(query)) {
        if (!defined.count(variable) && !IsBuiltInVariable(variable)) {
          problems.push_back(
              absl::StrCat(name, ": query uses undefined $", variable));
        }
      }
    }
  }
  return problems;
}

}  // namespace chimera::testing
