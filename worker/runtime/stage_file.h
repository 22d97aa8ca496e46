// The files a checkpoint step holds: their names, what each holds, and how a
// held model stage's state is put together again from the files of any
// partition and any sharding.
//
// One file per model stage, or, where the stage's optimizer state is sharded
// over G ranks (spec.sharding), one per part (StagePart):
//   blocks-<B>-<E>.pt                the whole stage of blocks [B, E)
//   blocks-<B>-<E>.part-<I>-of-<G>.pt  its part I of G
// Each is one torch.save dictionary (torch.load reads it too) of CPU tensors:
//   "parameter/<name>"       every parameter, by its name in the model (the
//                            whole stage's file, or part 0's), or under
//                            sharding full the part's shard of them: whole,
//                            or a piece of the flattened parameter, when
//   "parameter_offset/<name>" int64 scalar: the piece's first element
//   "parameter_shape/<name>"  int64 vector: the whole parameter's shape
//   "first_moment/<name>"    optimizer moments, where the optimizer has them:
//   "second_moment/<name>"   whole, shaped as the parameter, or a piece of
//                            the flattened moments, when
//   "moment_offset/<name>"   int64 scalar: the piece's first element
//   "optimizer_steps"        int64 scalar
// A part holds the moments of its shard of the stage's flat layout
// (ShardOf over FlattenParameters' order), so the parts' pieces of each
// parameter tile its moments exactly once.
//
//   TensorDict dict = ToDict(part);          // written as the part's file
//   StageAssembly assembly(held_parameters);  // names and shapes
//   for each file holding some of the held blocks:
//     RETURN_IF_ERROR(assembly.Add(ReadDict(file), file_name));
//   ASSIGN_OR_RETURN(StageState state, assembly.Finish());
#ifndef CHIMERA_WORKER_RUNTIME_STAGE_FILE_H_
#define CHIMERA_WORKER_RUNTIME_STAGE_FILE_H_

#include <ATen/core/Dict.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/model/model_config.h"
#include "worker/runtime/gradient_sync.h"
#include "worker/runtime/program_executor.h"

namespace chimera::worker {

using TensorDict = c10::Dict<std::string, at::Tensor>;

// Which file of a step: the blocks of its model stage, and its part of the
// stage's state ({0, 1}: all of it).
struct StageFileId {
  LayerRange blocks;
  GroupMember part;
};

std::string StageFileName(const StageFileId& id);
// The id a file name gives; nullopt for any other name (temporary files
// among them).
std::optional<StageFileId> ParseStageFileName(absl::string_view name);

// `part`'s entries, copied to CPU tensors.
TensorDict ToDict(const StagePart& part);

// The whole parameters a file's `dict` holds, by name.
std::vector<NamedTensor> ParametersOf(const TensorDict& dict);

// The pieces of parameters a file's `dict` holds (sharding full).
// INVALID_ARGUMENT naming `file` and the parameter when a piece's offset or
// shape is malformed.
absl::StatusOr<std::vector<ParameterPiece>> ParameterPiecesOf(
    const TensorDict& dict, absl::string_view file);

// Pieces of one flattened tensor, by first element, put together in
// `shape`; INVALID_ARGUMENT naming `what` when they do not tile it exactly
// once.
absl::StatusOr<at::Tensor> JoinPieces(
    const std::map<int64_t, at::Tensor>& pieces, at::IntArrayRef shape,
    absl::string_view what);

// A held model stage's state, put together from the dictionaries of the
// files that hold its blocks, in any partition and sharding.
class StageAssembly {
 public:
  // `parameters`: the held stage's, for their names and shapes.
  explicit StageAssembly(const std::vector<NamedTensor>& parameters);

  // Takes what `dict`, the contents of file `file`, holds of the stage.
  // INVALID_ARGUMENT naming the file and the parameter when a piece does not
  // fit in the parameter, or when its optimizer steps differ from another
  // file's.
  absl::Status Add(const TensorDict& dict, absl::string_view file);

  // The stage's state: a parameter no file held is undefined (ImportStage
  // rejects it); optimizer_steps is -1 when no file held it.
  // INVALID_ARGUMENT naming the parameter whose moments the pieces cover
  // partly or twice.
  absl::StatusOr<StageState> Finish() const;

 private:
  // A parameter's moment of one kind as the files hold it.
  struct Moment {
    at::Tensor whole;
    // Pieces, by first element: (element count, values).
    std::map<int64_t, at::Tensor> pieces;
  };
  struct Entry {
    std::string name;
    at::Tensor held;  // the held stage's parameter, for its shape
    Moment parameter;
    Moment first;
    Moment second;
  };

  // The values under `key` + the entry's name, whole or a piece at the
  // offset under `offset_key` + the name.
  static absl::Status AddPiece(const TensorDict& dict, const std::string& key,
                               const std::string& offset_key,
                               const Entry& entry, Moment& moment,
                               absl::string_view file);
  static absl::StatusOr<at::Tensor> Join(const Entry& entry,
                                         const Moment& moment,
                                         absl::string_view what);

  // In the held stage's order.
  std::vector<Entry> entries_;
  std::optional<int64_t> optimizer_steps_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_STAGE_FILE_H_
