#include "client/structured_output.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"

namespace chimera::client {
namespace {

// The API's times are doubles of Unix seconds in fields named "...Time".
bool IsTimeField(const std::string& name, const nlohmann::json& value) {
  return value.is_number() && absl::EndsWith(name, "Time");
}

std::string Rfc3339(double unix_seconds) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E3SZ",
                          absl::FromUnixMicros(static_cast<int64_t>(unix_seconds * 1e6)),
                          absl::UTCTimeZone());
}

void ConvertTimes(nlohmann::json& value) {
  if (value.is_array()) {
    for (nlohmann::json& element : value) ConvertTimes(element);
    return;
  }
  if (!value.is_object()) return;
  for (auto it = value.begin(); it != value.end();) {
    if (IsTimeField(it.key(), it.value())) {
      const double seconds = it.value().get<double>();
      if (seconds <= 0) {
        it = value.erase(it);
        continue;
      }
      it.value() = Rfc3339(seconds);
    } else {
      ConvertTimes(it.value());
    }
    ++it;
  }
}

void Emit(const nlohmann::json& value, YAML::Emitter& out) {
  if (value.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [key, element] : value.items()) {
      out << YAML::Key << key << YAML::Value;
      Emit(element, out);
    }
    out << YAML::EndMap;
  } else if (value.is_array()) {
    out << YAML::BeginSeq;
    for (const nlohmann::json& element : value) Emit(element, out);
    out << YAML::EndSeq;
  } else if (value.is_string()) {
    out << value.get<std::string>();
  } else if (value.is_boolean()) {
    out << value.get<bool>();
  } else if (value.is_number_integer()) {
    out << value.get<int64_t>();
  } else if (value.is_number()) {
    out << value.get<double>();
  } else {
    out << YAML::Null;
  }
}

}  // namespace

nlohmann::json ToJsonValue(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  // Scripts get every field, also empty lists and zero values.
  options.always_print_primitive_fields = true;
  google::protobuf::util::MessageToJsonString(message, &json, options);
  nlohmann::json value = nlohmann::json::parse(json);
  ConvertTimes(value);
  return value;
}

std::string ToJson(const google::protobuf::Message& message) {
  return ToJsonValue(message).dump(2);
}

std::string ToJsonLine(const google::protobuf::Message& message) {
  return ToJsonValue(message).dump();
}

std::string ToYaml(const google::protobuf::Message& message) {
  return JsonToYaml(ToJsonValue(message));
}

std::string JsonToYaml(const nlohmann::json& value) {
  YAML::Emitter out;
  Emit(value, out);
  return std::string(out.c_str()) + "\n";
}

}  // namespace chimera::client
