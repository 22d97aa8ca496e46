#include "worker/model/scripted_modules.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <torch/csrc/jit/serialization/import.h>
#include <unistd.h>

#include <exception>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/torchscript_layout.h"
#include "common/unique_fd.h"

namespace chimera::worker {
namespace {

// A TorchScript archive read in place through its descriptor (opened beneath
// the data root), so a large model is never held twice in memory.
class DescriptorReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  DescriptorReader(UniqueFd fd, size_t size)
      : fd_(std::move(fd)), size_(size) {}

  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n,
              const char* what) const override {
    size_t done = 0;
    while (done < n) {
      const ssize_t got = pread(fd_.get(), static_cast<char*>(buf) + done,
                                n - done, static_cast<off_t>(pos + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

 private:
  UniqueFd fd_;
  size_t size_;
};

// The first line of a LibTorch error: the rest is its C++ backtrace.
std::string FirstLine(const std::exception& error) {
  const absl::string_view what = error.what();
  return std::string(what.substr(0, what.find('\n')));
}

absl::StatusOr<torch::jit::Module> LoadFile(const Directory& modules,
                                            absl::string_view name,
                                            c10::ScalarType dtype) {
  ASSIGN_OR_RETURN(UniqueFd fd, modules.OpenFile(name, O_RDONLY));
  struct stat info {};
  if (fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(modules.Describe(name), ": not a regular file"));
  }
  try {
    torch::jit::Module module =
        torch::jit::load(std::make_shared<DescriptorReader>(
            std::move(fd), static_cast<size_t>(info.st_size)));
    module.to(dtype);
    module.train();
    return module;
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(modules.Describe(name),
                     ": not a TorchScript module (torch.jit.script(...).save "
                     "writes one): ",
                     FirstLine(error)));
  }
}

absl::Status CheckHasParameters(const Directory& modules,
                                absl::string_view name,
                                const torch::jit::Module& module) {
  if (module.parameters().size() > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(modules.Describe(name),
                   ": holds no parameters; every piece but the loss trains"));
}

std::string ShapeOf(const at::Tensor& tensor) {
  return absl::StrCat("[", absl::StrJoin(tensor.sizes(), ", "), "]");
}

// `module`'s forward on the probe `inputs`: a tensor, or INVALID_ARGUMENT
// naming the file.
absl::StatusOr<at::Tensor> Probe(const Directory& modules,
                                 absl::string_view name,
                                 torch::jit::Module& module,
                                 std::vector<c10::IValue> inputs,
                                 absl::string_view described_inputs) {
  c10::IValue output;
  try {
    output = module.forward(std::move(inputs));
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat(modules.Describe(name), ": forward(", described_inputs,
                     ") failed: ", FirstLine(error)));
  }
  if (!output.isTensor()) {
    return absl::InvalidArgumentError(
        absl::StrCat(modules.Describe(name), ": forward(", described_inputs,
                     ") returned a ", output.tagKind(), ", not a tensor"));
  }
  return output.toTensor();
}

// INVALID_ARGUMENT naming the file unless `output` has three dimensions,
// the first `fixed` of them as `input`'s, and `dtype`.
absl::Status CheckOutput(const Directory& modules, absl::string_view name,
                         const at::Tensor& output, const at::Tensor& input,
                         int64_t fixed, c10::ScalarType dtype,
                         absl::string_view contract) {
  bool fits = output.dim() == 3;
  for (int64_t d = 0; fits && d < fixed; ++d) {
    fits = output.size(d) == input.size(d);
  }
  if (fits && output.scalar_type() != dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(modules.Describe(name), ": returned ",
                     c10::toString(output.scalar_type()), " for the job's ",
                     c10::toString(dtype)));
  }
  if (fits) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(modules.Describe(name), ": returned a tensor of shape ",
                   ShapeOf(output), " given ", ShapeOf(input), "; ", contract));
}

// Runs the pieces in turn on one sample of token ids 0, checking each
// against the contract; records the hidden and vocabulary sizes.
absl::Status ProbeModel(const Directory& modules,
                        const std::vector<std::string>& block_files,
                        const ScriptedProbe& probe, ScriptedModules& model) {
  at::NoGradGuard no_grad;
  const at::Tensor tokens = at::zeros({1, probe.seq_length}, at::kLong);
  ASSIGN_OR_RETURN(at::Tensor hidden,
                   Probe(modules, kScriptedEmbeddingFile, model.embedding,
                         {tokens}, absl::StrCat("tokens ", ShapeOf(tokens))));
  RETURN_IF_ERROR(CheckOutput(
      modules, kScriptedEmbeddingFile, hidden, tokens, 2, probe.dtype,
      "an embedding maps token ids [batch, tokens] to [batch, tokens, "
      "hidden]"));
  model.hidden_size = hidden.size(2);
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    const std::string& name = block_files[i];
    ASSIGN_OR_RETURN(at::Tensor out,
                     Probe(modules, name, model.blocks[i], {hidden},
                           absl::StrCat("x ", ShapeOf(hidden))));
    RETURN_IF_ERROR(CheckOutput(modules, name, out, hidden, 3, probe.dtype,
                                "a block returns its input's shape"));
    hidden = std::move(out);
  }
  ASSIGN_OR_RETURN(const at::Tensor logits,
                   Probe(modules, kScriptedHeadFile, model.head, {hidden},
                         absl::StrCat("x ", ShapeOf(hidden))));
  RETURN_IF_ERROR(CheckOutput(
      modules, kScriptedHeadFile, logits, hidden, 2, probe.dtype,
      "a head maps [batch, tokens, hidden] to logits [batch, tokens, vocab]"));
  model.vocab_size = logits.size(2);
  ASSIGN_OR_RETURN(
      const at::Tensor loss,
      Probe(modules, kScriptedLossFile, model.loss, {logits, tokens},
            absl::StrCat("logits ", ShapeOf(logits), ", targets ",
                         ShapeOf(tokens))));
  if (loss.dim() == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      modules.Describe(kScriptedLossFile), ": returned a tensor of shape ",
      ShapeOf(loss), "; a loss returns a scalar, the sum over the tokens"));
}

// OK when the loaded pieces have the sizes the job declares (and planned
// with); INVALID_ARGUMENT naming the first that differs.
absl::Status CheckSizes(const ScriptedModules& model, const ModelConfig& config,
                        const Directory& modules) {
  const auto blocks = static_cast<int64_t>(model.blocks.size());
  for (const auto& [field, declared, found] :
       {std::tuple<absl::string_view, int64_t, int64_t>{
            "num_layers (its blocks)", config.num_layers, blocks},
        {"hidden_size (its hidden states' width)", config.hidden_size,
         model.hidden_size},
        {"vocab_size (its logits' width)", config.vocab_size,
         model.vocab_size}}) {
    if (declared != found) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the TorchScript model in '", modules.path(), "' has ", found,
          " for model.", field, "; the job declares ", declared));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ScriptedModules> LoadScriptedModules(
    const Directory& modules, const ScriptedProbe& probe) {
  if (probe.seq_length <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_length must be > 0, got ", probe.seq_length));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> block_files,
                   ScriptedPieceFiles(modules));
  ScriptedModules model;
  ASSIGN_OR_RETURN(model.embedding,
                   LoadFile(modules, kScriptedEmbeddingFile, probe.dtype));
  RETURN_IF_ERROR(
      CheckHasParameters(modules, kScriptedEmbeddingFile, model.embedding));
  for (const std::string& name : block_files) {
    ASSIGN_OR_RETURN(torch::jit::Module block,
                     LoadFile(modules, name, probe.dtype));
    RETURN_IF_ERROR(CheckHasParameters(modules, name, block));
    model.blocks.push_back(std::move(block));
  }
  ASSIGN_OR_RETURN(model.head,
                   LoadFile(modules, kScriptedHeadFile, probe.dtype));
  RETURN_IF_ERROR(CheckHasParameters(modules, kScriptedHeadFile, model.head));
  ASSIGN_OR_RETURN(model.loss,
                   LoadFile(modules, kScriptedLossFile, probe.dtype));
  RETURN_IF_ERROR(ProbeModel(modules, block_files, probe, model));
  return model;
}

absl::StatusOr<ScriptedModules> LoadScriptedModulesFor(
    const Directory& modules, const ModelConfig& config) {
  ASSIGN_OR_RETURN(
      ScriptedModules model,
      LoadScriptedModules(
          modules, {.seq_length = config.seq_length, .dtype = config.dtype}));
  RETURN_IF_ERROR(CheckSizes(model, config, modules));
  return model;
}

at::Tensor MeanTokenLoss(torch::jit::Module& loss, const at::Tensor& logits,
                         const at::Tensor& targets, double samples) {
  const double tokens = samples * static_cast<double>(targets.size(1));
  return loss.forward({logits, targets}).toTensor() / tokens;
}

std::shared_ptr<torch::nn::Module> ParameterMirror(
    const torch::jit::Module& piece) {
  auto mirror = std::make_shared<torch::nn::Module>();
  // A parameter's name holds no dot: its submodules are mirrored in turn.
  for (const auto& parameter : piece.named_parameters(/*recurse=*/false)) {
    mirror->register_parameter(parameter.name, parameter.value);
  }
  for (const auto& child : piece.named_children()) {
    mirror->register_module(child.name, ParameterMirror(child.value));
  }
  return mirror;
}

}  // namespace chimera::worker
