// The files of a TorchScript model's directory (spec.model.modules): what
// scripts/export-torchscript writes, the job validator checks before a job
// is accepted, and the worker loads (worker/model/scripted_modules.h).
//
//   embedding.pt, block-0.pt ... block-<N-1>.pt, head.pt, loss.pt
//
//   ASSIGN_OR_RETURN(std::vector<std::string> blocks,
//                    ScriptedPieceFiles(modules));  // N names, in order
#ifndef CHIMERA_COMMON_TORCHSCRIPT_LAYOUT_H_
#define CHIMERA_COMMON_TORCHSCRIPT_LAYOUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/directory.h"

namespace chimera {

inline constexpr absl::string_view kScriptedEmbeddingFile = "embedding.pt";
inline constexpr absl::string_view kScriptedHeadFile = "head.pt";
inline constexpr absl::string_view kScriptedLossFile = "loss.pt";

// The block files of `modules`, block 0 first, once the embedding, the head
// and the loss are there too. NOT_FOUND naming the first piece missing;
// INVALID_ARGUMENT naming a file ending in .pt that is no piece, or the
// first number missing among the blocks.
absl::StatusOr<std::vector<std::string>> ScriptedPieceFiles(
    const Directory& modules);

}  // namespace chimera

#endif  // CHIMERA_COMMON_TORCHSCRIPT_LAYOUT_H_
