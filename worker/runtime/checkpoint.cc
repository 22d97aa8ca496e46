#include "worker/runtime/checkpoint.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_reader.h"
#include "common/status_macros.h"
#include "worker/comm/torch_error.h"
#include "worker/runtime/program_executor.h"

namespace chimera::worker {
namespace {

// A stage file is one torch.save dictionary (torch.load reads it too):
//   "parameter/<name>"       every parameter, by its name in the model
//   "first_moment/<name>"    optimizer state, where the optimizer has it
//   "second_moment/<name>"
//   "optimizer_steps"        int64 scalar
constexpr char kParameter[] = "parameter/";
constexpr char kFirstMoment[] = "first_moment/";
constexpr char kSecondMoment[] = "second_moment/";
constexpr char kOptimizerSteps[] = "optimizer_steps";
// The job attempt that claimed the directory last, in decimal.
constexpr char kAttemptFile[] = "attempt";

using TensorDict = c10::Dict<std::string, at::Tensor>;

// Files hold CPU tensors, so a checkpoint written on a GPU loads anywhere.
TensorDict ToDict(const StageState& state) {
  TensorDict dict;
  for (size_t i = 0; i < state.parameters.size(); ++i) {
    const std::string& name = state.parameters[i].first;
    dict.insert(kParameter + name, state.parameters[i].second.cpu());
    const at::Tensor& first = state.optimizer.first_moments[i];
    const at::Tensor& second = state.optimizer.second_moments[i];
    if (first.defined()) dict.insert(kFirstMoment + name, first.cpu());
    if (second.defined()) dict.insert(kSecondMoment + name, second.cpu());
  }
  dict.insert(kOptimizerSteps,
              at::scalar_tensor(state.optimizer.steps, at::kLong));
  return dict;
}

// The state of the parameters named in `like` (a held stage's current
// state), read from `dict`; undefined tensors where `dict` lacks them, which
// ImportStage rejects for parameters.
StageState FromDict(const TensorDict& dict, const StageState& like) {
  const auto find = [&dict](const std::string& key) {
    auto it = dict.find(key);
    return it == dict.end() ? at::Tensor() : it->value();
  };
  StageState state;
  for (const auto& [name, parameter] : like.parameters) {
    state.parameters.emplace_back(name, find(kParameter + name));
    state.optimizer.first_moments.push_back(find(kFirstMoment + name));
    state.optimizer.second_moments.push_back(find(kSecondMoment + name));
  }
  const at::Tensor steps = find(kOptimizerSteps);
  state.optimizer.steps = steps.defined() ? steps.item<int64_t>() : -1;
  return state;
}

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

// Writes `bytes` to `path` so that the file appears whole or not at all, and
// stays after a crash of the machine: a synced temporary file renamed into
// place, then the directory synced so the rename is durable too.
absl::Status WriteDurably(const std::string& path,
                          const std::vector<char>& bytes) {
  // Unique per process: a task of an earlier attempt may still be ending.
  const std::string temporary = absl::StrCat(path, ".tmp-", getpid());
  const int fd =
      open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create checkpoint file", temporary);
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const absl::Status error =
          ErrnoError("cannot write checkpoint file", temporary);
      close(fd);
      return error;
    }
    written += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    const absl::Status error =
        ErrnoError("cannot sync checkpoint file", temporary);
    close(fd);
    return error;
  }
  close(fd);
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    return ErrnoError(absl::StrCat("cannot rename '", temporary, "' to"), path);
  }
  const std::string directory =
      std::filesystem::path(path).parent_path().string();
  const int dir_fd =
      open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0)
    return ErrnoError("cannot open checkpoint directory", directory);
  const bool synced = fsync(dir_fd) == 0;
  close(dir_fd);
  if (!synced) return ErrnoError("cannot sync checkpoint directory", directory);
  return absl::OkStatus();
}

// "blocks-<B>-<E>.pt" -> [B, E); nullopt for any other name (temporary
// files among them).
std::optional<LayerRange> ParseStageFileName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "blocks-") ||
      !absl::ConsumeSuffix(&name, ".pt")) {
    return std::nullopt;
  }
  const std::vector<absl::string_view> bounds = absl::StrSplit(name, '-');
  LayerRange blocks;
  if (bounds.size() != 2 || !absl::SimpleAtoi(bounds[0], &blocks.begin) ||
      !absl::SimpleAtoi(bounds[1], &blocks.end) || blocks.begin >= blocks.end) {
    return std::nullopt;
  }
  return blocks;
}

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

absl::StatusOr<TensorDict> ReadDict(const std::string& path) {
  ASSIGN_OR_RETURN(const uint64_t size, RegularFileSize(path));
  ASSIGN_OR_RETURN(const std::string bytes, ReadFilePrefix(path, size));
  try {
    const c10::IValue value =
        torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
    if (!value.isGenericDict()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint file '", path, "' holds no dictionary"));
    }
    return c10::impl::toTypedDict<std::string, at::Tensor>(
        value.toGenericDict());
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read checkpoint file '", path, "': ", TorchErrorMessage(e)));
  }
}

}  // namespace

std::vector<int> StagesWrittenBy(const schedule::Schedule& schedule, int rank) {
  std::set<int> claimed;  // model stages held by a lower rank
  for (const schedule::WorkerProgram& program : schedule.workers) {
    if (program.rank >= rank) continue;
    for (const schedule::StageRef& ref : program.stages) {
      claimed.insert(schedule.topology.ModelStage(ref));
    }
  }
  std::set<int> written;
  for (const schedule::StageRef& ref : schedule.workers.at(rank).stages) {
    const int model_stage = schedule.topology.ModelStage(ref);
    if (claimed.count(model_stage) == 0) written.insert(model_stage);
  }
  return {written.begin(), written.end()};
}

CheckpointDir::CheckpointDir(std::string root, int64_t attempt)
    : root_(std::move(root)), attempt_(attempt) {}

absl::StatusOr<int64_t> CheckpointDir::ClaimedAttempt() const {
  const std::string path = absl::StrCat(root_, "/", kAttemptFile);
  if (!std::filesystem::exists(path)) return 0;
  ASSIGN_OR_RETURN(const std::string text, ReadFilePrefix(path, 32));
  int64_t attempt = 0;
  if (!absl::SimpleAtoi(text, &attempt)) {
    return absl::DataLossError(
        absl::StrCat("'", path, "' holds no attempt number"));
  }
  return attempt;
}

absl::Status CheckpointDir::CheckNotSuperseded() const {
  ASSIGN_OR_RETURN(const int64_t claimed, ClaimedAttempt());
  if (claimed > attempt_) {
    return absl::AbortedError(absl::StrCat(
        "attempt ", claimed, " of this job has replaced attempt ", attempt_,
        ", which stops writing checkpoints to '", root_, "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckpointDir::Claim() const {
  RETURN_IF_ERROR(CheckNotSuperseded());
  std::error_code error;
  std::filesystem::create_directories(root_, error);
  if (error) {
    return absl::InternalError(absl::StrCat(
        "cannot create checkpoint directory '", root_, "': ", error.message()));
  }
  const std::string number = absl::StrCat(attempt_);
  return WriteDurably(absl::StrCat(root_, "/", kAttemptFile),
                      std::vector<char>(number.begin(), number.end()));
}

std::string CheckpointDir::StepPath(int64_t step) const {
  return absl::StrCat(root_, "/step-", step);
}

std::string CheckpointDir::StagePath(int64_t step, LayerRange blocks) const {
  return absl::StrCat(StepPath(step), "/blocks-", blocks.begin, "-", blocks.end,
                      ".pt");
}

std::vector<CheckpointDir::StageFile> CheckpointDir::StageFiles(
    int64_t step) const {
  std::vector<StageFile> files;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(StepPath(step), error)) {
    const std::optional<LayerRange> blocks =
        ParseStageFileName(entry.path().filename().string());
    if (blocks && entry.is_regular_file(error)) {
      files.push_back({*blocks, entry.path().string()});
    }
  }
  std::sort(files.begin(), files.end(),
            [](const StageFile& a, const StageFile& b) {
              return a.blocks.begin < b.blocks.begin;
            });
  return files;
}

absl::Status CheckpointDir::CheckComplete(int64_t step,
                                          int64_t num_layers) const {
  int64_t next = 0;
  for (const StageFile& file : StageFiles(step)) {
    if (file.blocks.begin != next) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint of step ", step, " in '", StepPath(step),
                       "' is incomplete: ",
                       file.blocks.begin > next ? "no file holds block "
                                                : "two files hold block ",
                       std::min(next, file.blocks.begin)));
    }
    next = file.blocks.end;
  }
  if (next != num_layers) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint of step ", step, " in '", StepPath(step),
        "' is incomplete: no file holds block ", next, " of ", num_layers));
  }
  return absl::OkStatus();
}

std::optional<int64_t> CheckpointDir::LatestComplete(int64_t num_layers) const {
  std::optional<int64_t> latest;
  for (int64_t step : Steps()) {
    if ((!latest || step > *latest) && CheckComplete(step, num_layers).ok())
      latest = step;
  }
  return latest;
}

absl::Status CheckpointDir::Save(const ProgramExecutor& executor, int64_t step,
                                 const std::vector<int>& model_stages) const {
  RETURN_IF_ERROR(CheckNotSuperseded());
  if (model_stages.empty()) return absl::OkStatus();
  std::error_code error;
  std::filesystem::create_directories(StepPath(step), error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create checkpoint directory '", StepPath(step),
                     "': ", error.message()));
  }
  for (int model_stage : model_stages) {
    ASSIGN_OR_RETURN(const StageState state, executor.ExportStage(model_stage));
    std::vector<char> bytes;
    try {
      bytes = torch::jit::pickle_save(ToDict(state));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("cannot serialise model stage ",
                                              model_stage, ": ",
                                              TorchErrorMessage(e)));
    }
    RETURN_IF_ERROR(WriteDurably(
        StagePath(step, executor.options().partition[model_stage]), bytes));
  }
  return absl::OkStatus();
}

absl::Status CheckpointDir::Load(ProgramExecutor& executor,
                                 int64_t step) const {
  RETURN_IF_ERROR(CheckComplete(step, executor.options().model.num_layers));
  const std::vector<StageFile> files = StageFiles(step);
  for (int model_stage : executor.model_stages()) {
    const LayerRange held = executor.options().partition[model_stage];
    // The files holding the stage's blocks, merged by parameter name.
    TensorDict merged;
    std::vector<std::string> paths;
    for (const StageFile& file : files) {
      if (!Overlap(file.blocks, held)) continue;
      ASSIGN_OR_RETURN(const TensorDict dict, ReadDict(file.path));
      for (const auto& entry : dict) merged.insert(entry.key(), entry.value());
      paths.push_back(file.path);
    }
    ASSIGN_OR_RETURN(const StageState current,
                     executor.ExportStage(model_stage));
    const absl::Status imported =
        executor.ImportStage(model_stage, FromDict(merged, current));
    if (!imported.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint file '", absl::StrJoin(paths, "', '"),
                       "': ", imported.message()));
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> CheckpointDir::Steps() const {
  std::vector<int64_t> steps;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(root_, error)) {
    const std::optional<int64_t> step =
        ParseStepDirName(entry.path().filename().string());
    if (step) steps.push_back(*step);
  }
  return steps;
}

absl::Status CheckpointDir::RemoveStep(int64_t step) const {
  // Every rank prunes the shared directory, so another may be deleting the
  // same files: an entry that vanishes under remove_all is its doing, not an
  // error. Each try removes what is left, until nothing is.
  constexpr int kTries = 100;
  std::error_code error;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    std::filesystem::remove_all(StepPath(step), error);
    if (error != std::errc::no_such_file_or_directory) break;
  }
  if (error) {
    return absl::InternalError(absl::StrCat(
        "cannot delete checkpoint '", StepPath(step), "': ", error.message()));
  }
  return absl::OkStatus();
}

absl::Status CheckpointDir::RemoveStepsBefore(int64_t step) const {
  RETURN_IF_ERROR(CheckNotSuperseded());
  for (int64_t old : Steps()) {
    if (old < step) RETURN_IF_ERROR(RemoveStep(old));
  }
  return absl::OkStatus();
}

absl::Status CheckpointDir::RemoveStepsAfter(int64_t step) const {
  RETURN_IF_ERROR(CheckNotSuperseded());
  for (int64_t newer : Steps()) {
    if (newer > step) RETURN_IF_ERROR(RemoveStep(newer));
  }
  return absl::OkStatus();
}

}  // namespace chimera::worker
