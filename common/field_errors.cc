#include "common/field_errors.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chimera {

std::string FieldError::ToString() const {
  return path.empty() ? message : absl::StrCat(path, ": ", message);
}

void FieldErrors::Add(absl::string_view path, absl::string_view message) {
  errors_.push_back(FieldError{std::string(path), std::string(message)});
}

void FieldErrors::Append(const FieldErrors& other) {
  errors_.insert(errors_.end(), other.errors_.begin(), other.errors_.end());
}

absl::Status FieldErrors::ToStatus() const {
  if (errors_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(
      errors_, "\n", [](std::string* out, const FieldError& error) {
        out->append(error.ToString());
      }));
}

}  // namespace chimera
