// `chimera list -l SELECTOR`: the jobs a kubectl-style label selector picks
// by their metadata.labels. A selector is comma-separated requirements, all
// of which must hold: KEY=VALUE (or KEY==VALUE), KEY!=VALUE (also true when
// the label is missing), KEY (the label is set) and !KEY (it is not).
//
//   ASSIGN_OR_RETURN(LabelSelector selector,
//                    LabelSelector::Parse("team=nlp,!experimental"));
//   if (selector.Matches(job.manifest().metadata().labels())) ...
#ifndef CHIMERA_CLIENT_LABEL_SELECTOR_H_
#define CHIMERA_CLIENT_LABEL_SELECTOR_H_

#include <google/protobuf/map.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera::client {

class LabelSelector {
 public:
  // INVALID_ARGUMENT naming the requirement that is not one of the forms
  // above.
  static absl::StatusOr<LabelSelector> Parse(absl::string_view text);

  bool Matches(
      const google::protobuf::Map<std::string, std::string>& labels) const;

 private:
  struct Requirement {
    enum class Kind { kEquals, kNotEquals, kExists, kMissing };
    Kind kind;
    std::string key;
    std::string value;
  };

  std::vector<Requirement> requirements_;
};

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_LABEL_SELECTOR_H_
