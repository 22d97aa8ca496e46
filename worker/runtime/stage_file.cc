#include "worker/runtime/stage_file.h"

#include <ATen/ATen.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "worker/runtime/optimizer.h"

namespace chimera::worker {
namespace {

constexpr char kParameter[] = "parameter/";
constexpr char kFirstMoment[] = "first_moment/";
constexpr char kSecondMoment[] = "second_moment/";
constexpr char kMomentOffset[] = "moment_offset/";
constexpr char kParameterOffset[] = "parameter_offset/";
constexpr char kParameterShape[] = "parameter_shape/";
constexpr char kOptimizerSteps[] = "optimizer_steps";

at::Tensor Find(const TensorDict& dict, const std::string& key) {
  const auto it = dict.find(key);
  return it == dict.end() ? at::Tensor() : it->value();
}

// "<B>-<E>" -> [B, E).
std::optional<LayerRange> ParseBlocks(absl::string_view text) {
  const std::vector<absl::string_view> bounds = absl::StrSplit(text, '-');
  LayerRange blocks;
  if (bounds.size() != 2 || !absl::SimpleAtoi(bounds[0], &blocks.begin) ||
      !absl::SimpleAtoi(bounds[1], &blocks.end) || blocks.begin < 0 ||
      blocks.begin >= blocks.end) {
    return std::nullopt;
  }
  return blocks;
}

// "<I>-of-<G>" -> part I of G.
std::optional<GroupMember> ParsePart(absl::string_view text) {
  const std::vector<absl::string_view> words = absl::StrSplit(text, "-of-");
  GroupMember part;
  if (words.size() != 2 || !absl::SimpleAtoi(words[0], &part.member) ||
      !absl::SimpleAtoi(words[1], &part.members) || part.member < 0 ||
      part.members < 2 || part.member >= part.members) {
    return std::nullopt;
  }
  return part;
}

}  // namespace

std::string StageFileName(const StageFileId& id) {
  const std::string blocks =
      absl::StrCat("blocks-", id.blocks.begin, "-", id.blocks.end);
  if (id.part.members == 1) return absl::StrCat(blocks, ".pt");
  return absl::StrCat(blocks, ".part-", id.part.member, "-of-", id.part.members,
                      ".pt");
}

std::optional<StageFileId> ParseStageFileName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "blocks-") ||
      !absl::ConsumeSuffix(&name, ".pt")) {
    return std::nullopt;
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(name, absl::MaxSplits(".part-", 1));
  StageFileId id;
  const std::optional<LayerRange> blocks = ParseBlocks(fields[0]);
  if (!blocks) return std::nullopt;
  id.blocks = *blocks;
  if (fields.size() == 1) return id;
  const std::optional<GroupMember> part = ParsePart(fields[1]);
  if (!part) return std::nullopt;
  id.part = *part;
  return id;
}

TensorDict ToDict(const StagePart& part) {
  TensorDict dict;
  for (const auto& [name, parameter] : part.parameters) {
    dict.insert(kParameter + name, parameter.cpu());
  }
  for (const ParameterPiece& piece : part.parameter_pieces) {
    dict.insert(kParameter + piece.name, piece.values.cpu());
    dict.insert(kParameterOffset + piece.name,
                at::scalar_tensor(piece.offset, at::kLong));
    dict.insert(kParameterShape + piece.name,
                at::tensor(piece.shape, at::kLong));
  }
  for (const MomentPiece& moment : part.moments) {
    if (moment.first.defined()) {
      dict.insert(kFirstMoment + moment.name, moment.first.cpu());
    }
    if (moment.second.defined()) {
      dict.insert(kSecondMoment + moment.name, moment.second.cpu());
    }
    if (moment.offset) {
      dict.insert(kMomentOffset + moment.name,
                  at::scalar_tensor(*moment.offset, at::kLong));
    }
  }
  dict.insert(kOptimizerSteps,
              at::scalar_tensor(part.optimizer_steps, at::kLong));
  return dict;
}

std::vector<NamedTensor> ParametersOf(const TensorDict& dict) {
  std::vector<NamedTensor> parameters;
  for (const auto& entry : dict) {
    absl::string_view name = entry.key();
    if (absl::ConsumePrefix(&name, kParameter) &&
        !Find(dict, kParameterOffset + std::string(name)).defined()) {
      parameters.emplace_back(std::string(name), entry.value());
    }
  }
  return parameters;
}

absl::StatusOr<std::vector<ParameterPiece>> ParameterPiecesOf(
    const TensorDict& dict, absl::string_view file) {
  std::vector<ParameterPiece> pieces;
  for (const auto& entry : dict) {
    absl::string_view name = entry.key();
    if (!absl::ConsumePrefix(&name, kParameterOffset)) continue;
    ParameterPiece piece;
    piece.name = std::string(name);
    piece.values = Find(dict, kParameter + piece.name);
    const at::Tensor offset = entry.value();
    const at::Tensor shape = Find(dict, kParameterShape + piece.name);
    if (!piece.values.defined() || piece.values.dim() != 1 ||
        offset.numel() != 1 || !shape.defined() || shape.dim() != 1 ||
        shape.scalar_type() != at::kLong) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, " holds a piece of parameter ", piece.name,
          " without 1-D values, a one-number offset and an int64 shape"));
    }
    piece.offset = offset.item<int64_t>();
    const at::Tensor dims = shape.contiguous();
    piece.shape.assign(dims.data_ptr<int64_t>(),
                       dims.data_ptr<int64_t>() + dims.numel());
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

absl::StatusOr<at::Tensor> JoinPieces(
    const std::map<int64_t, at::Tensor>& pieces, at::IntArrayRef shape,
    absl::string_view what) {
  int64_t numel = 1;
  for (int64_t dim : shape) numel *= dim;
  int64_t next = 0;
  std::vector<at::Tensor> joined;
  for (const auto& [first, values] : pieces) {
    if (first != next) break;
    joined.push_back(values);
    next += values.numel();
  }
  if (joined.size() != pieces.size() || next != numel) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pieces of ", what, " cover elements [0, ", next,
                     ") of ", numel, ", then stop or overlap"));
  }
  return at::cat(joined).view(shape);
}

StageAssembly::StageAssembly(const std::vector<NamedTensor>& parameters) {
  for (const auto& [name, parameter] : parameters) {
    entries_.push_back({name, parameter, {}, {}, {}});
  }
}

absl::Status StageAssembly::Add(const TensorDict& dict,
                                absl::string_view file) {
  if (const at::Tensor steps = Find(dict, kOptimizerSteps); steps.defined()) {
    if (steps.numel() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, " holds ", kOptimizerSteps, " of ", steps.numel(),
                       " elements; it must be one number"));
    }
    const int64_t value = steps.item<int64_t>();
    if (optimizer_steps_ && *optimizer_steps_ != value) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, " holds the optimizer state after ", value,
          " steps; another file of the stage after ", *optimizer_steps_));
    }
    optimizer_steps_ = value;
  }
  for (Entry& entry : entries_) {
    RETURN_IF_ERROR(AddPiece(dict, kParameter, kParameterOffset, entry,
                             entry.parameter, file));
    RETURN_IF_ERROR(
        AddPiece(dict, kFirstMoment, kMomentOffset, entry, entry.first, file));
    RETURN_IF_ERROR(AddPiece(dict, kSecondMoment, kMomentOffset, entry,
                             entry.second, file));
  }
  return absl::OkStatus();
}

absl::Status StageAssembly::AddPiece(const TensorDict& dict,
                                     const std::string& key,
                                     const std::string& offset_key,
                                     const Entry& entry, Moment& moment,
                                     absl::string_view file) {
  const at::Tensor values = Find(dict, key + entry.name);
  if (!values.defined()) return absl::OkStatus();
  const at::Tensor offset = Find(dict, offset_key + entry.name);
  // A tied embedding's weight is whole in the files of both ends.
  if (!offset.defined()) {
    moment.whole = values;
    return absl::OkStatus();
  }
  const int64_t numel = entry.held.numel();
  const int64_t first = offset.numel() == 1 ? offset.item<int64_t>() : -1;
  if (values.dim() != 1 || first < 0 || first + values.numel() > numel) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, " holds a piece of ", key, entry.name, " of ", values.numel(),
        " elements from element ", first, ", which does not fit in the ", numel,
        " of the parameter"));
  }
  moment.pieces[first] = values;
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> StageAssembly::Join(const Entry& entry,
                                               const Moment& moment,
                                               absl::string_view what) {
  if (moment.pieces.empty()) return moment.whole;
  const std::string name = absl::StrCat("parameter ", entry.name, "'s ", what);
  if (moment.whole.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a file holds ", name, " whole, another a piece of it"));
  }
  return JoinPieces(moment.pieces, entry.held.sizes(), name);
}

absl::StatusOr<StageState> StageAssembly::Finish() const {
  StageState state;
  state.optimizer.steps = optimizer_steps_.value_or(-1);
  for (const Entry& entry : entries_) {
    ASSIGN_OR_RETURN(at::Tensor values,
                     Join(entry, entry.parameter, "values"));
    state.parameters.emplace_back(entry.name, std::move(values));
    ASSIGN_OR_RETURN(state.optimizer.first_moments.emplace_back(),
                     Join(entry, entry.first, "first moment"));
    ASSIGN_OR_RETURN(state.optimizer.second_moments.emplace_back(),
                     Join(entry, entry.second, "second moment"));
  }
  return state;
}

}  // namespace chimera::worker
