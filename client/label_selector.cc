#include "client/label_selector.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace chimera::client {
namespace {

// A label key: letters, digits and - _ . / (Kubernetes' label keys).
bool IsKey(absl::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.' &&
        c != '/') {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<LabelSelector> LabelSelector::Parse(absl::string_view text) {
  LabelSelector selector;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    Requirement requirement;
    size_t operator_at = part.find("!=");
    size_t value_at = operator_at + 2;
    requirement.kind = Requirement::Kind::kNotEquals;
    if (operator_at == absl::string_view::npos) {
      operator_at = part.find('=');
      value_at = operator_at + 1;
      if (value_at < part.size() && part[value_at] == '=') ++value_at;
      requirement.kind = Requirement::Kind::kEquals;
    }
    if (operator_at != absl::string_view::npos) {
      requirement.key = std::string(part.substr(0, operator_at));
      requirement.value = std::string(part.substr(value_at));
    } else if (absl::ConsumePrefix(&part, "!")) {
      requirement.kind = Requirement::Kind::kMissing;
      requirement.key = std::string(part);
    } else {
      requirement.kind = Requirement::Kind::kExists;
      requirement.key = std::string(part);
    }
    if (!IsKey(requirement.key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "-l: '", part,
          "' is not KEY=VALUE, KEY!=VALUE, KEY or !KEY (keys: letters, "
          "digits, - _ . /)"));
    }
    selector.requirements_.push_back(std::move(requirement));
  }
  return selector;
}

bool LabelSelector::Matches(
    const google::protobuf::Map<std::string, std::string>& labels) const {
  for (const Requirement& requirement : requirements_) {
    const auto label = labels.find(requirement.key);
    const bool set = label != labels.end();
    bool holds = false;
    switch (requirement.kind) {
      case Requirement::Kind::kEquals:
        holds = set && label->second == requirement.value;
        break;
      case Requirement::Kind::kNotEquals:
        holds = !set || label->second != requirement.value;
        break;
      case Requirement::Kind::kExists:
        holds = set;
        break;
      case Requirement::Kind::kMissing:
        holds = !set;
        break;
    }
    if (!holds) return false;
  }
  return true;
}

}  // namespace chimera::client
