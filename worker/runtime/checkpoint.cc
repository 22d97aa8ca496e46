#include "worker/runtime/checkpoint.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "worker/comm/torch_error.h"
#include "worker/runtime/program_executor.h"
#include "worker/runtime/stage_file.h"

namespace chimera::worker {
namespace {

// The last claim of the directory: its attempt, in decimal, and token.
constexpr char kAttemptFile[] = "attempt";

// "step-<S>" -> S.
std::optional<int64_t> ParseStepDirName(absl::string_view name) {
  int64_t step = 0;
  if (!absl::ConsumePrefix(&name, "step-") || !absl::SimpleAtoi(name, &step)) {
    return std::nullopt;
  }
  return step;
}

bool Overlap(LayerRange a, LayerRange b) {
  return a.begin < b.end && b.begin < a.end;
}

absl::StatusOr<TensorDict> ReadDict(const Directory& step,
                                    const std::string& name) {
  ASSIGN_OR_RETURN(const std::string bytes,
                   step.ReadFile(name, std::numeric_limits<uint64_t>::max()));
  try {
    const c10::IValue value =
        torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
    if (!value.isGenericDict()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint file ", step.Describe(name), " holds no dictionary"));
    }
    return c10::impl::toTypedDict<std::string, at::Tensor>(
        value.toGenericDict());
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read checkpoint file ", step.Describe(name), ": ",
                     TorchErrorMessage(e)));
  }
}

std::string StepName(int64_t step) { return absl::StrCat("step-", step); }

bool SameBlocks(LayerRange a, LayerRange b) {
  return a.begin == b.begin && a.end == b.end;
}

}  // namespace

std::vector<int> StagesWrittenBy(const schedule::ScheduleOutline& outline,
                                 int rank, schedule::Sharding sharding) {
  std::set<int> claimed;  // model stages held by a lower rank
  if (sharding == schedule::Sharding::kNone) {
    for (int lower = 0; lower < rank; ++lower) {
      for (const schedule::StageRef& ref : outline.stages_by_rank[lower]) {
        claimed.insert(outline.topology.ModelStage(ref));
      }
    }
  }
  std::set<int> written;
  for (const schedule::StageRef& ref : outline.stages_by_rank.at(rank)) {
    const int model_stage = outline.topology.ModelStage(ref);
    if (claimed.count(model_stage) == 0) written.insert(model_stage);
  }
  return {written.begin(), written.end()};
}

absl::StatusOr<std::vector<StageView>> StageViews(
    const ProgramExecutor& executor, const std::vector<int>& model_stages) {
  std::vector<StageView> views;
  for (int model_stage : model_stages) {
    ASSIGN_OR_RETURN(StagePart part, executor.ExportPart(model_stage));
    views.push_back(StageView{executor.spec().partition.stage(model_stage),
                              std::move(part)});
  }
  return views;
}

absl::StatusOr<std::vector<SerializedStage>> Serialize(
    const std::vector<StageView>& stages) {
  std::vector<SerializedStage> serialized;
  for (const StageView& stage : stages) {
    const StageFileId file{stage.blocks, stage.state.part};
    try {
      serialized.push_back(
          SerializedStage{file, torch::jit::pickle_save(ToDict(stage.state))});
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("cannot serialise ",
                                              StageFileName(file), ": ",
                                              TorchErrorMessage(e)));
    }
  }
  return serialized;
}

CheckpointDir::CheckpointDir(Directory directory, int64_t attempt)
    : directory_(std::move(directory)), attempt_(attempt) {}

absl::StatusOr<CheckpointDir> CheckpointDir::Open(const Directory& root,
                                                  absl::string_view path,
                                                  int64_t attempt,
                                                  bool create) {
  ASSIGN_OR_RETURN(Directory directory, root.Open(path, create));
  return CheckpointDir(std::move(directory), attempt);
}

absl::StatusOr<CheckpointDir::ClaimRecord> CheckpointDir::LastClaim() const {
  absl::StatusOr<std::string> text = directory_.ReadFile(kAttemptFile, 256);
  if (absl::IsNotFound(text.status())) return ClaimRecord{};
  if (!text.ok()) return text.status();
  const std::vector<std::string> words =
      absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  ClaimRecord claim;
  if (words.empty() || !absl::SimpleAtoi(words[0], &claim.attempt)) {
    return absl::DataLossError(absl::StrCat(
        directory_.Describe(kAttemptFile), " holds no attempt number"));
  }
  if (words.size() > 1) claim.token = words[1];
  return claim;
}

absl::Status CheckpointDir::CheckNotSuperseded() const {
  ASSIGN_OR_RETURN(const ClaimRecord claim, LastClaim());
  if (claim.attempt > attempt_) {
    return absl::AbortedError(absl::StrCat(
        "attempt ", claim.attempt, " of this job has replaced attempt ",
        attempt_, ", which stops writing checkpoints to ", directory_.Describe("")));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CheckpointDir::Claim() const {
  RETURN_IF_ERROR(CheckNotSuperseded());
  const std::string token =
      absl::StrFormat("%016x", absl::Uniform<uint64_t>(absl::BitGen()));
  RETURN_IF_ERROR(directory_.WriteFileDurably(
      kAttemptFile, absl::StrCat(attempt_, " ", token, "\n")));
  return token;
}

absl::Status CheckpointDir::CheckClaim(absl::string_view token) const {
  ASSIGN_OR_RETURN(const ClaimRecord claim, LastClaim());
  if (claim.attempt > attempt_) return CheckNotSuperseded();
  if (claim.attempt != attempt_ || claim.token != token) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this worker does not see the checkpoints rank 0 claimed in ",
        directory_.Describe(""),
        ": every worker's --checkpoint-root must be the same shared file "
        "system for a job with spec.training.checkpointEvery"));
  }
  return absl::OkStatus();
}

std::vector<CheckpointDir::StageFile> CheckpointDir::StageFiles(
    int64_t step) const {
  std::vector<StageFile> files;
  absl::StatusOr<Directory> step_dir = directory_.Open(StepName(step), false);
  if (!step_dir.ok()) return files;
  absl::StatusOr<std::vector<Directory::Entry>> entries = step_dir->List();
  if (!entries.ok()) return files;
  for (const Directory::Entry& entry : *entries) {
    const std::optional<StageFileId> id = ParseStageFileName(entry.name);
    if (id && entry.type == Directory::Entry::Type::kRegularFile) {
      files.push_back({*id, entry.name});
    }
  }
  std::sort(files.begin(), files.end(),
            [](const StageFile& a, const StageFile& b) {
              return std::tie(a.id.blocks.begin, a.id.blocks.end,
                              a.id.part.members, a.id.part.member) <
                     std::tie(b.id.blocks.begin, b.id.blocks.end,
                              b.id.part.members, b.id.part.member);
            });
  return files;
}

std::vector<CheckpointDir::SavedStage> CheckpointDir::SavedStages(
    const std::vector<StageFile>& files) {
  std::vector<SavedStage> stages;
  for (const StageFile& file : files) {
    if (stages.empty() || !SameBlocks(stages.back().blocks, file.id.blocks)) {
      stages.push_back({file.id.blocks, file.id.part.members, {}});
    }
    SavedStage& stage = stages.back();
    // Parts of two savings with different sharding: neither is whole.
    if (stage.parts != file.id.part.members) stage.parts = 0;
    stage.present.insert(file.id.part.member);
  }
  return stages;
}

absl::Status CheckpointDir::CheckComplete(int64_t step,
                                          int64_t num_layers) const {
  const std::string shown = directory_.Describe(StepName(step));
  const auto incomplete = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint of step ", step, " in ", shown, " is incomplete: ", why));
  };
  int64_t next = 0;
  for (const SavedStage& stage : SavedStages(StageFiles(step))) {
    if (stage.blocks.begin != next) {
      return incomplete(absl::StrCat(stage.blocks.begin > next
                                         ? "no file holds block "
                                         : "two files hold block ",
                                     std::min(next, stage.blocks.begin)));
    }
    if (stage.parts == 0) {
      return incomplete(absl::StrCat("blocks [", stage.blocks.begin, ", ",
                                     stage.blocks.end,
                                     ") are in parts of two shardings"));
    }
    if (static_cast<int>(stage.present.size()) != stage.parts) {
      return incomplete(absl::StrCat(
          "blocks [", stage.blocks.begin, ", ", stage.blocks.end, ") have ",
          stage.present.size(), " of their ", stage.parts, " parts"));
    }
    next = stage.blocks.end;
  }
  if (next != num_layers) {
    return incomplete(
        absl::StrCat("no file holds block ", next, " of ", num_layers));
  }
  return absl::OkStatus();
}

std::optional<int64_t> CheckpointDir::LatestComplete(int64_t num_layers) const {
  const std::vector<int64_t> steps = Steps();
  for (auto step = steps.rbegin(); step != steps.rend(); ++step) {
    if (CheckComplete(*step, num_layers).ok()) return *step;
  }
  return std::nullopt;
}

absl::Status CheckpointDir::Write(
    int64_t step, const std::vector<SerializedStage>& stages) const {
  RETURN_IF_ERROR(CheckNotSuperseded());
  if (stages.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const Directory step_dir,
                   directory_.Open(StepName(step), /*create=*/true));
  const std::vector<StageFile> present = StageFiles(step);
  for (const SerializedStage& stage : stages) {
    // What an earlier attempt under another partition or sharding left of
    // these blocks would make the step hold them twice; the other parts of
    // this saving are written by the other members of the stage's group.
    for (const StageFile& file : present) {
      const bool sibling = SameBlocks(file.id.blocks, stage.file.blocks) &&
                           file.id.part.members == stage.file.part.members;
      if (Overlap(file.id.blocks, stage.file.blocks) && !sibling) {
        RETURN_IF_ERROR(step_dir.Remove(file.name));
      }
    }
    RETURN_IF_ERROR(step_dir.WriteFileDurably(
        StageFileName(stage.file),
        absl::string_view(stage.bytes.data(), stage.bytes.size())));
  }
  return absl::OkStatus();
}

absl::Status CheckpointDir::Save(const ProgramExecutor& executor, int64_t step,
                                 const std::vector<int>& model_stages) const {
  ASSIGN_OR_RETURN(const std::vector<StageView> views,
                   StageViews(executor, model_stages));
  ASSIGN_OR_RETURN(const std::vector<SerializedStage> stages, Serialize(views));
  return Write(step, stages);
}

absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>>
CheckpointDir::Parameters(int64_t step, int64_t num_layers) const {
  RETURN_IF_ERROR(CheckComplete(step, num_layers));
  ASSIGN_OR_RETURN(const Directory step_dir,
                   directory_.Open(StepName(step), /*create=*/false));
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  // A tied embedding's weight is in the first and the last stage's files.
  std::set<std::string> seen;
  // Parameters saved in pieces (sharding full), by name: shape and pieces.
  std::map<std::string, std::pair<std::vector<int64_t>,
                                  std::map<int64_t, at::Tensor>>>
      pieced;
  for (const StageFile& file : StageFiles(step)) {
    ASSIGN_OR_RETURN(const TensorDict dict, ReadDict(step_dir, file.name));
    for (NamedTensor& parameter : ParametersOf(dict)) {
      if (seen.insert(parameter.first).second) {
        parameters.push_back(std::move(parameter));
      }
    }
    const std::string described = step_dir.Describe(file.name);
    ASSIGN_OR_RETURN(std::vector<ParameterPiece> pieces,
                     ParameterPiecesOf(dict, described));
    for (ParameterPiece& piece : pieces) {
      auto& [shape, by_offset] = pieced[piece.name];
      shape = piece.shape;
      by_offset[piece.offset] = std::move(piece.values);
    }
  }
  for (const auto& [name, joined] : pieced) {
    ASSIGN_OR_RETURN(at::Tensor values,
                     JoinPieces(joined.second, joined.first,
                                absl::StrCat("parameter ", name, "'s values")));
    parameters.emplace_back(name, std::move(values));
  }
  return parameters;
}

absl::Status CheckpointDir::Load(ProgramExecutor& executor,
                                 int64_t step) const {
  RETURN_IF_ERROR(CheckComplete(step, executor.spec().model.num_layers));
  ASSIGN_OR_RETURN(const Directory step_dir,
                   directory_.Open(StepName(step), /*create=*/false));
  const std::vector<StageFile> files = StageFiles(step);
  for (int model_stage : executor.model_stages()) {
    const LayerRange held = executor.spec().partition.stage(model_stage);
    ASSIGN_OR_RETURN(const std::vector<NamedTensor> parameters,
                     executor.StageParameters(model_stage));
    // The files holding the stage's blocks, in any partition and sharding.
    StageAssembly assembly(parameters);
    std::vector<std::string> shown;
    for (const StageFile& file : files) {
      if (!Overlap(file.id.blocks, held)) continue;
      shown.push_back(step_dir.Describe(file.name));
      ASSIGN_OR_RETURN(const TensorDict dict, ReadDict(step_dir, file.name));
      const absl::Status added = assembly.Add(dict, shown.back());
      if (!added.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint file ", added.message()));
      }
    }
    absl::StatusOr<StageState> state = assembly.Finish();
    const absl::Status imported =
        state.ok() ? executor.ImportStage(model_stage, *state) : state.status();
    if (!imported.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint file ", absl::StrJoin(shown, ", "), ": ",
                       imported.message()));
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> CheckpointDir::Steps() const {
  std::vector<int64_t> steps;
  absl::StatusOr<std::vector<Directory::Entry>> entries = directory_.List();
  if (!entries.ok()) return steps;
  for (const Directory::Entry& entry : *entries) {
    const std::optional<int64_t> step = ParseStepDirName(entry.name);
    if (step && entry.type == Directory::Entry::Type::kDirectory) {
      steps.push_back(*step);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

absl::Status CheckpointDir::RemoveSteps(
    const std::vector<int64_t>& steps) const {
  RETURN_IF_ERROR(CheckNotSuperseded());
  for (int64_t step : steps) {
    RETURN_IF_ERROR(directory_.Remove(StepName(step)));
  }
  return absl::OkStatus();
}

absl::Status CheckpointDir::Prune(int64_t num_layers) const {
  const std::vector<int64_t> steps = Steps();
  std::vector<int64_t> complete;
  for (int64_t step : steps) {
    if (CheckComplete(step, num_layers).ok()) complete.push_back(step);
  }
  if (complete.empty()) return absl::OkStatus();
  const int64_t latest = complete.back();
  // The directory keeps the two latest complete steps: the one before the
  // latest (the latest itself when it is the only one) is kept too.
  const int64_t kept = complete.size() > 1 ? complete.end()[-2] : latest;
  std::vector<int64_t> superseded;
  for (int64_t step : steps) {
    if (step < latest && step != kept) superseded.push_back(step);
  }
  return RemoveSteps(superseded);
}

absl::Status CheckpointDir::RemoveAllSteps() const {
  return RemoveSteps(Steps());
}

}  // namespace chimera::worker
