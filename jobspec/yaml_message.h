// YAML documents into protobuf messages, strictly: the YAML is checked
// against the message's descriptor (field names in their lowerCamelCase JSON
// form, types, value ranges), converted to JSON, and parsed with the protobuf
// JSON mapping, so the .proto stays the one schema of every user document.
// Every problem is reported, each with its field path; unknown fields, wrong
// types and out-of-range numbers are errors, never silently dropped.
//
//   chimera::v1::TrainJob job;
//   FieldErrors errors = LoadYamlMessageFile("job.yaml", &job);
//   if (!errors.empty()) return errors.ToStatus();
//
// Hostile input is bounded: files over kMaxYamlFileBytes, nesting deeper than
// kMaxYamlDepth and documents whose aliases expand past kMaxYamlNodes nodes
// (a "billion laughs" bomb) are rejected with an error.
#ifndef CHIMERA_JOBSPEC_YAML_MESSAGE_H_
#define CHIMERA_JOBSPEC_YAML_MESSAGE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/field_errors.h"
#include "google/protobuf/message.h"

namespace chimera::jobspec {

inline constexpr uint64_t kMaxYamlFileBytes = 1 << 20;
inline constexpr int kMaxYamlDepth = 32;
inline constexpr int kMaxYamlNodes = 100000;
// Past this many problems the rest of a document is not examined.
inline constexpr int kMaxYamlErrors = 50;

// Parses one YAML document into `message` (cleared first). On errors the
// content of `message` is unspecified.
FieldErrors ParseYamlMessage(absl::string_view yaml,
                             google::protobuf::Message* message);

// Checks a document's envelope: apiVersion must be kApiVersion (version.h)
// and kind must be `expected_kind`.
void CheckApiVersionAndKind(absl::string_view api_version,
                            absl::string_view kind,
                            absl::string_view expected_kind,
                            FieldErrors* errors);

// Reads `path` (a non-empty text file of at most kMaxYamlFileBytes) and
// parses it as above. Problems with the file itself have an empty path.
FieldErrors LoadYamlMessageFile(const std::string& path,
                                google::protobuf::Message* message);

}  // namespace chimera::jobspec

#endif  // CHIMERA_JOBSPEC_YAML_MESSAGE_H_
