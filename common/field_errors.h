// FieldErrors: every problem found in a user document (a job file, a cluster
// file, an RPC request), each tied to the field path it is about, so that all
// of them can be reported together rather than only the first.
//
//   FieldErrors errors;
//   if (spec.num_layers() <= 0)
//     errors.Add("spec.model.numLayers", absl::StrCat(spec.num_layers(),
//                " must be > 0"));
//   RETURN_IF_ERROR(errors.ToStatus());
#ifndef CHIMERA_COMMON_FIELD_ERRORS_H_
#define CHIMERA_COMMON_FIELD_ERRORS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace chimera {

struct FieldError {
  // Dotted path with the document's own (lowerCamelCase) names, e.g.
  // "spec.model.hiddenSize"; empty for problems with the whole document.
  std::string path;
  // What is wrong: the value and what is allowed.
  std::string message;

  // "path: message", or the message alone when there is no path.
  std::string ToString() const;
};

class FieldErrors {
 public:
  void Add(absl::string_view path, absl::string_view message);
  void Append(const FieldErrors& other);

  bool empty() const { return errors_.empty(); }
  size_t size() const { return errors_.size(); }
  const std::vector<FieldError>& errors() const { return errors_; }

  // OK when empty; otherwise INVALID_ARGUMENT whose message holds every error,
  // one per line, in the order they were added.
  absl::Status ToStatus() const;

 private:
  std::vector<FieldError> errors_;
};

}  // namespace chimera

#endif  // CHIMERA_COMMON_FIELD_ERRORS_H_
