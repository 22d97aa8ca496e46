// Messages as scripts read them (-o json, -o yaml): field names as job files
// write them (lowerCamelCase, protobuf's JSON names), every field present
// (zeros and empty lists included), and times as RFC 3339 UTC strings
// ("2026-11-24T04:12:09.250Z") where the API holds Unix seconds; a time not
// reached yet (0) is left out.
//
//   std::cout << ToJson(job) << "\n";
//   std::cout << ToYaml(job);
#ifndef CHIMERA_CLIENT_STRUCTURED_OUTPUT_H_
#define CHIMERA_CLIENT_STRUCTURED_OUTPUT_H_

#include <string>

#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace chimera::client {

// The message as a JSON value, by the rules above.
nlohmann::json ToJsonValue(const google::protobuf::Message& message);

// Indented JSON.
std::string ToJson(const google::protobuf::Message& message);
// One line of JSON, for streams of events.
std::string ToJsonLine(const google::protobuf::Message& message);
// A YAML document.
std::string ToYaml(const google::protobuf::Message& message);
// A JSON value as a YAML document.
std::string JsonToYaml(const nlohmann::json& value);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_STRUCTURED_OUTPUT_H_
