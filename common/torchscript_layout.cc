#include "common/torchscript_layout.h"

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace chimera {
namespace {

constexpr absl::string_view kBlockPrefix = "block-";
constexpr absl::string_view kSuffix = ".pt";

// The number of block file `name` ("block-<i>.pt", no leading zero); -1
// for any other name.
int BlockNumber(absl::string_view name) {
  int index = -1;
  if (!absl::ConsumePrefix(&name, kBlockPrefix) ||
      !absl::ConsumeSuffix(&name, kSuffix) || name.empty() ||
      (name.size() > 1 && name[0] == '0') || !absl::SimpleAtoi(name, &index)) {
    return -1;
  }
  return index;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ScriptedPieceFiles(
    const Directory& modules) {
  ASSIGN_OR_RETURN(const std::vector<Directory::Entry> entries, modules.List());
  std::set<std::string> names;
  std::map<int, std::string> blocks;
  for (const Directory::Entry& entry : entries) {
    names.insert(entry.name);
    const absl::string_view name = entry.name;
    if (!absl::EndsWith(name, kSuffix) || name == kScriptedEmbeddingFile ||
        name == kScriptedHeadFile || name == kScriptedLossFile) {
      continue;
    }
    const int index = BlockNumber(name);
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          modules.Describe(entry.name),
          ": not a piece of a model: a modules directory holds embedding.pt, "
          "block-0.pt ... block-<N-1>.pt, head.pt and loss.pt"));
    }
    blocks.emplace(index, entry.name);
  }
  for (absl::string_view piece :
       {kScriptedEmbeddingFile, kScriptedHeadFile, kScriptedLossFile}) {
    if (names.count(std::string(piece)) == 0) {
      return absl::NotFoundError(
          absl::StrCat(modules.Describe(piece), " is missing"));
    }
  }
  if (blocks.empty()) {
    return absl::NotFoundError(
        absl::StrCat(modules.Describe("block-0.pt"),
                     " is missing: a model has at least one block"));
  }
  std::vector<std::string> files;
  for (const auto& [index, name] : blocks) {
    const int expected = static_cast<int>(files.size());
    if (index != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          modules.Describe(absl::StrCat(kBlockPrefix, expected, kSuffix)),
          " is missing: blocks are numbered from 0 without gaps (",
          blocks.size(), " block files found)"));
    }
    files.push_back(name);
  }
  return files;
}

}  // namespace chimera
