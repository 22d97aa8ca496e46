#include "worker/runtime/checkpoint.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
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

using TensorDict = c10::Dict<std::string, at::Tensor>;

TensorDict ToDict(const StageState& state) {
  TensorDict dict;
  for (size_t i = 0; i < state.parameters.size(); ++i) {
    const std::string& name = state.parameters[i].first;
    dict.insert(kParameter + name, state.parameters[i].second);
    const at::Tensor& first = state.optimizer.first_moments[i];
    const at::Tensor& second = state.optimizer.second_moments[i];
    if (first.defined()) dict.insert(kFirstMoment + name, first);
    if (second.defined()) dict.insert(kSecondMoment + name, second);
  }
  dict.insert(kOptimizerSteps, at::scalar_tensor(state.optimizer.steps, at::kLong));
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

absl::Status WriteAtomically(const std::string& path, const std::vector<char>& bytes) {
  // Unique per process: a task of an earlier attempt may still be ending.
  const std::string temporary = absl::StrCat(path, ".tmp-", getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      return absl::InternalError(absl::StrCat("cannot write checkpoint file '", temporary, "'"));
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot rename '", temporary, "' to '", path,
                                            "': ", error.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorDict> ReadDict(const std::string& path) {
  ASSIGN_OR_RETURN(const uint64_t size, RegularFileSize(path));
  ASSIGN_OR_RETURN(const std::string bytes, ReadFilePrefix(path, size));
  try {
    const c10::IValue value = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
    if (!value.isGenericDict()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint file '", path, "' holds no dictionary"));
    }
    return c10::impl::toTypedDict<std::string, at::Tensor>(value.toGenericDict());
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read checkpoint file '", path,
                                                   "': ", TorchErrorMessage(e)));
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

CheckpointDir::CheckpointDir(std::string root) : root_(std::move(root)) {}

std::string CheckpointDir::StepPath(int64_t step) const {
  return absl::StrCat(root_, "/step-", step);
}

std::string CheckpointDir::StagePath(int64_t step, int model_stage) const {
  return absl::StrCat(StepPath(step), "/stage-", model_stage, ".pt");
}

std::string CheckpointDir::MissingStagePath(int64_t step, int num_model_stages) const {
  for (int stage = 0; stage < num_model_stages; ++stage) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(StagePath(step, stage), error)) {
      return StagePath(step, stage);
    }
  }
  return "";
}

bool CheckpointDir::IsComplete(int64_t step, int num_model_stages) const {
  return num_model_stages > 0 && MissingStagePath(step, num_model_stages).empty();
}

absl::Status CheckpointDir::Save(const ProgramExecutor& executor, int64_t step,
                                 const std::vector<int>& model_stages) const {
  if (model_stages.empty()) return absl::OkStatus();
  std::error_code error;
  std::filesystem::create_directories(StepPath(step), error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create checkpoint directory '",
                                            StepPath(step), "': ", error.message()));
  }
  for (int model_stage : model_stages) {
    ASSIGN_OR_RETURN(const StageState state, executor.ExportStage(model_stage));
    std::vector<char> bytes;
    try {
      bytes = torch::jit::pickle_save(ToDict(state));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("cannot serialise model stage ", model_stage,
                                              ": ", TorchErrorMessage(e)));
    }
    RETURN_IF_ERROR(WriteAtomically(StagePath(step, model_stage), bytes));
  }
  return absl::OkStatus();
}

absl::Status CheckpointDir::Load(ProgramExecutor& executor, int64_t step,
                                 int num_model_stages) const {
  const std::string missing = MissingStagePath(step, num_model_stages);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint of step ", step, " is incomplete: '", missing, "' does not exist"));
  }
  for (int model_stage : executor.model_stages()) {
    const std::string path = StagePath(step, model_stage);
    ASSIGN_OR_RETURN(const TensorDict dict, ReadDict(path));
    ASSIGN_OR_RETURN(const StageState current, executor.ExportStage(model_stage));
    const absl::Status imported = executor.ImportStage(model_stage, FromDict(dict, current));
    if (!imported.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint file '", path, "': ", imported.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace chimera::worker
