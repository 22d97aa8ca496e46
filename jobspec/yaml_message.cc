#include "jobspec/yaml_message.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/file_reader.h"
#include "common/spelling.h"
#include "common/version.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace chimera::jobspec {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using Json = nlohmann::json;

std::string Join(const std::string& path, absl::string_view name) {
  return path.empty() ? std::string(name) : absl::StrCat(path, ".", name);
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      return absl::StrCat("'", node.Scalar(), "'");
    default:
      return "nothing";
  }
}

// A plain (unquoted) scalar may be a number or a boolean; a quoted one is
// always a string, as in YAML's core schema.
bool IsPlainScalar(const YAML::Node& node) {
  return node.IsScalar() && node.Tag() != "!";
}

// Whether an integer field may be spelled as `node`: plain, or, for 64-bit
// fields, also quoted, since protobuf's JSON mapping writes 64-bit integers
// as strings (what other tools export must read back).
bool NumberSpellingFits(const YAML::Node& node,
                        const google::protobuf::FieldDescriptor& field) {
  using google::protobuf::FieldDescriptor;
  return IsPlainScalar(node) ||
         field.cpp_type() == FieldDescriptor::CPPTYPE_INT64 ||
         field.cpp_type() == FieldDescriptor::CPPTYPE_UINT64;
}

// YAML spells infinity and NaN .inf, -.inf and .nan (any case).
bool IsYamlInfinityOrNan(absl::string_view text) {
  if (!absl::ConsumePrefix(&text, "+")) absl::ConsumePrefix(&text, "-");
  const std::string lower = absl::AsciiStrToLower(text);
  return lower == ".inf" || lower == ".nan";
}

// Walks a YAML tree along a message descriptor and builds the equivalent
// JSON, recording every mismatch in `errors`.
class YamlToJson {
 public:
  explicit YamlToJson(FieldErrors* errors) : errors_(errors) {}

  std::optional<Json> Message(const YAML::Node& node, const Descriptor& type,
                              const std::string& path, int depth) {
    if (!Enter(path, depth)) return std::nullopt;
    if (!node.IsMap()) {
      errors_->Add(path, absl::StrCat("expected a mapping of ", type.name(),
                                      " fields, got ", Describe(node)));
      return std::nullopt;
    }
    Json object = Json::object();
    std::set<std::string> seen;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) {
        errors_->Add(path, "mapping keys must be plain names");
        continue;
      }
      const std::string key = entry.first.Scalar();
      const std::string field_path = Join(path, key);
      if (!seen.insert(key).second) {
        errors_->Add(field_path, "appears more than once");
        continue;
      }
      const FieldDescriptor* field = FindByJsonName(type, key);
      if (field == nullptr) {
        errors_->Add(field_path, UnknownFieldMessage(type, key));
        continue;
      }
      if (entry.second.IsNull()) continue;  // `key:` with no value = unset.
      std::optional<Json> value =
          Field(entry.second, *field, field_path, depth);
      if (value) object[key] = std::move(*value);
    }
    return object;
  }

 private:
  // Counts nodes and depth; false once a limit is hit (reported once).
  bool Enter(const std::string& path, int depth) {
    if (budget_exceeded_) return false;
    if (errors_->size() >= kMaxYamlErrors) {
      budget_exceeded_ = true;
      errors_->Add("", absl::StrCat("more than ", kMaxYamlErrors,
                                    " problems; the rest is not checked"));
      return false;
    }
    if (++nodes_ > kMaxYamlNodes) {
      budget_exceeded_ = true;
      errors_->Add(
          "", absl::StrCat("the document expands to more than ", kMaxYamlNodes,
                           " nodes (too large, or aliases that "
                           "repeat too much)"));
      return false;
    }
    if (depth > kMaxYamlDepth) {
      budget_exceeded_ = true;
      errors_->Add(
          path, absl::StrCat("nested deeper than ", kMaxYamlDepth, " levels"));
      return false;
    }
    return true;
  }

  static const FieldDescriptor* FindByJsonName(const Descriptor& type,
                                               absl::string_view name) {
    for (int i = 0; i < type.field_count(); ++i) {
      if (type.field(i)->json_name() == name) return type.field(i);
    }
    return nullptr;
  }

  static std::string UnknownFieldMessage(const Descriptor& type,
                                         const std::string& key) {
    const FieldDescriptor* by_proto_name = type.FindFieldByName(key);
    if (by_proto_name != nullptr) {
      return absl::StrCat("unknown field; did you mean '",
                          by_proto_name->json_name(), "'?");
    }
    std::vector<std::string> names;
    for (int i = 0; i < type.field_count(); ++i) {
      names.push_back(type.field(i)->json_name());
    }
    if (const std::optional<std::string> meant = ClosestSpelling(key, names)) {
      return absl::StrCat("unknown field; did you mean '", *meant, "'?");
    }
    return absl::StrCat("unknown field; ", type.name(), " has ",
                        absl::StrJoin(names, ", "));
  }

  std::optional<Json> Field(const YAML::Node& node,
                            const FieldDescriptor& field,
                            const std::string& path, int depth) {
    if (field.is_map()) return Map(node, field, path, depth);
    if (field.is_repeated()) {
      if (!Enter(path, depth + 1)) return std::nullopt;
      if (!node.IsSequence()) {
        errors_->Add(path,
                     absl::StrCat("expected a list, got ", Describe(node)));
        return std::nullopt;
      }
      Json array = Json::array();
      for (size_t i = 0; i < node.size(); ++i) {
        std::optional<Json> element = Singular(
            node[i], field, absl::StrCat(path, "[", i, "]"), depth + 1);
        if (element) array.push_back(std::move(*element));
      }
      return array;
    }
    return Singular(node, field, path, depth);
  }

  std::optional<Json> Map(const YAML::Node& node, const FieldDescriptor& field,
                          const std::string& path, int depth) {
    if (!Enter(path, depth + 1)) return std::nullopt;
    if (!node.IsMap()) {
      errors_->Add(path,
                   absl::StrCat("expected a mapping, got ", Describe(node)));
      return std::nullopt;
    }
    const FieldDescriptor& value_field = *field.message_type()->map_value();
    Json object = Json::object();
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) {
        errors_->Add(path, "mapping keys must be plain names");
        continue;
      }
      const std::string key = entry.first.Scalar();
      std::optional<Json> value =
          Singular(entry.second, value_field, Join(path, key), depth + 1);
      if (value) object[key] = std::move(*value);
    }
    return object;
  }

  std::optional<Json> Singular(const YAML::Node& node,
                               const FieldDescriptor& field,
                               const std::string& path, int depth) {
    if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      return Message(node, *field.message_type(), path, depth + 1);
    }
    if (!Enter(path, depth + 1)) return std::nullopt;
    if (!node.IsScalar()) {
      errors_->Add(path, absl::StrCat("expected ", ScalarKind(field), ", got ",
                                      Describe(node)));
      return std::nullopt;
    }
    return Scalar(node, field, path);
  }

  // `node`, a scalar, as a value of `field`'s (non-message) type.
  std::optional<Json> Scalar(const YAML::Node& node,
                             const FieldDescriptor& field,
                             const std::string& path) {
    const std::string& text = node.Scalar();
    switch (field.cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        return Json(text);
      case FieldDescriptor::CPPTYPE_BOOL:
        if (!IsPlainScalar(node)) return Wrong(node, field, path);
        if (text == "true") return Json(true);
        if (text == "false") return Json(false);
        return Wrong(node, field, path);
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
        return Signed(node, field, path);
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
        return Unsigned(node, field, path);
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT:
        return Floating(node, field, path);
      case FieldDescriptor::CPPTYPE_ENUM:
        return EnumName(node, field, path);
      case FieldDescriptor::CPPTYPE_MESSAGE:
        break;  // Handled by Singular.
    }
    return Wrong(node, field, path);
  }

  // Records that `node` does not spell a value of `field`'s type.
  std::optional<Json> Wrong(const YAML::Node& node,
                            const FieldDescriptor& field,
                            const std::string& path) {
    errors_->Add(path, absl::StrCat("expected ", ScalarKind(field), ", got ",
                                    IsPlainScalar(node) ? "" : "string ", "'",
                                    node.Scalar(), "'"));
    return std::nullopt;
  }

  std::optional<Json> Signed(const YAML::Node& node,
                             const FieldDescriptor& field,
                             const std::string& path) {
    const std::string& text = node.Scalar();
    int64_t value;
    if (!NumberSpellingFits(node, field) || !absl::SimpleAtoi(text, &value)) {
      return Wrong(node, field, path);
    }
    const bool is32 = field.cpp_type() == FieldDescriptor::CPPTYPE_INT32;
    if (is32 && (value > std::numeric_limits<int32_t>::max() ||
                 value < std::numeric_limits<int32_t>::min())) {
      errors_->Add(path, absl::StrCat(text, " is out of the 32-bit range"));
      return std::nullopt;
    }
    return Json(value);
  }

  std::optional<Json> Unsigned(const YAML::Node& node,
                               const FieldDescriptor& field,
                               const std::string& path) {
    const std::string& text = node.Scalar();
    uint64_t value;
    if (!NumberSpellingFits(node, field) || !absl::SimpleAtoi(text, &value)) {
      return Wrong(node, field, path);
    }
    if (field.cpp_type() == FieldDescriptor::CPPTYPE_UINT32 &&
        value > std::numeric_limits<uint32_t>::max()) {
      errors_->Add(path, absl::StrCat(text, " is out of the 32-bit range"));
      return std::nullopt;
    }
    return Json(value);
  }

  std::optional<Json> Floating(const YAML::Node& node,
                               const FieldDescriptor& field,
                               const std::string& path) {
    const std::string& text = node.Scalar();
    double value;
    if (!IsPlainScalar(node)) return Wrong(node, field, path);
    if (IsYamlInfinityOrNan(text) ||
        (absl::SimpleAtod(text, &value) && !std::isfinite(value))) {
      errors_->Add(path, absl::StrCat("'", text, "' is not a finite number"));
      return std::nullopt;
    }
    if (!absl::SimpleAtod(text, &value)) return Wrong(node, field, path);
    return Json(value);
  }

  std::optional<Json> EnumName(const YAML::Node& node,
                               const FieldDescriptor& field,
                               const std::string& path) {
    const std::string& text = node.Scalar();
    if (field.enum_type()->FindValueByName(text) == nullptr) {
      std::vector<std::string> names;
      for (int i = 0; i < field.enum_type()->value_count(); ++i) {
        names.push_back(field.enum_type()->value(i)->name());
      }
      errors_->Add(path, absl::StrCat("'", text, "' is not one of ",
                                      absl::StrJoin(names, ", ")));
      return std::nullopt;
    }
    return Json(text);
  }

  static std::string ScalarKind(const FieldDescriptor& field) {
    switch (field.cpp_type()) {
      case FieldDescriptor::CPPTYPE_BOOL:
        return "true or false";
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
        return "an integer";
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
        return "a non-negative integer";
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT:
        return "a number";
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return "a mapping";
      default:
        return "a string";
    }
  }

  FieldErrors* errors_;
  int nodes_ = 0;
  bool budget_exceeded_ = false;
};

// "line L, column C: ..." for the first control character YAML does not
// allow (all but tab, line feed and carriage return, and DEL); nullopt when
// there is none. Checked before yaml-cpp reads the text: some of them send
// its scanner into an endless loop (found by the job-file fuzzer).
std::optional<std::string> FindControlCharacter(absl::string_view yaml) {
  int line = 1;
  int column = 1;
  for (const char c : yaml) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t' && c != '\n' && c != '\r') || byte == 0x7f) {
      return absl::StrCat("line ", line, ", column ", column, ": control character 0x",
                          absl::Hex(byte, absl::kZeroPad2), " is not allowed in YAML");
    }
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::nullopt;
}

// Counts a text's YAML documents, stopping at two. yaml-cpp's LoadAll never
// returns when a document begins with a stray ',': its parser yields an
// empty document there forever without reading on (found by the fuzzers).
// A document that starts where the one before it did is that: the mark
// where the parser is stuck.
class DocumentCounter final : public YAML::EventHandler {
 public:
  struct Count {
    int documents = 0;
    std::optional<YAML::Mark> stuck_at;
  };
  // Throws YAML::Exception where the text is not YAML.
  static Count Of(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentCounter counter;
    while (counter.starts_.size() < 2 && parser.HandleNextDocument(counter)) {
    }
    Count count{static_cast<int>(counter.starts_.size()), std::nullopt};
    if (count.documents == 2 && counter.starts_[0].pos == counter.starts_[1].pos) {
      count.stuck_at = counter.starts_[0];
    }
    return count;
  }

  void OnDocumentStart(const YAML::Mark& mark) override { starts_.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  std::vector<YAML::Mark> starts_;
};

std::string AtMark(const YAML::Mark& mark) {
  return absl::StrCat("line ", mark.line + 1, ", column ", mark.column + 1);
}

}  // namespace

FieldErrors ParseYamlMessage(absl::string_view yaml,
                             google::protobuf::Message* message) {
  FieldErrors errors;
  message->Clear();
  if (std::optional<std::string> control = FindControlCharacter(yaml)) {
    errors.Add("", absl::StrCat("not valid YAML: ", *control));
    return errors;
  }
  const std::string text(yaml);
  YAML::Node document;
  try {
    const DocumentCounter::Count count = DocumentCounter::Of(text);
    if (count.stuck_at) {
      errors.Add("", absl::StrCat("not valid YAML: ", AtMark(*count.stuck_at),
                                  ": a document cannot begin with ','"));
      return errors;
    }
    if (count.documents != 1) {
      errors.Add("", count.documents == 0
                         ? "expected one YAML document, found none"
                         : "expected one YAML document, found more than one");
      return errors;
    }
    document = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    errors.Add("", absl::StrCat("not valid YAML: ", AtMark(e.mark), ": ", e.msg));
    return errors;
  }
  YamlToJson converter(&errors);
  std::optional<Json> json =
      converter.Message(document, *message->GetDescriptor(), "", 0);
  if (!errors.empty() || !json) return errors;

  std::string json_text;
  try {
    json_text = json->dump();
  } catch (const Json::type_error&) {
    // yaml-cpp passes a scalar's bytes on as they are; protobuf strings
    // are UTF-8, and nlohmann refuses to write anything else.
    errors.Add("", "holds a string that is not valid UTF-8");
    return errors;
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      json_text, message, options);
  if (!status.ok()) {
    errors.Add("", absl::StrCat("does not match the schema: ",
                                status.message().as_string()));
  }
  return errors;
}

void CheckApiVersionAndKind(absl::string_view api_version,
                            absl::string_view kind,
                            absl::string_view expected_kind,
                            FieldErrors* errors) {
  if (api_version != kApiVersion) {
    errors->Add("apiVersion", absl::StrCat("'", api_version, "' must be '",
                                           kApiVersion, "'"));
  }
  if (kind != expected_kind) {
    errors->Add("kind",
                absl::StrCat("'", kind, "' must be '", expected_kind, "'"));
  }
}

FieldErrors LoadYamlMessageFile(const std::string& path,
                                google::protobuf::Message* message) {
  absl::StatusOr<std::string> yaml = ReadTextFile(path, kMaxYamlFileBytes);
  if (!yaml.ok()) {
    FieldErrors errors;
    errors.Add("", yaml.status().message());
    return errors;
  }
  return ParseYamlMessage(*yaml, message);
}

}  // namespace chimera::jobspec
