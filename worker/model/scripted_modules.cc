#include "worker/model/scripted_modules.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <torch/csrc/jit/serialization/import.h>
#include <unistd.h>

#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"

namespace chimera::worker {
namespace {

constexpr absl::string_view kEmbeddingFile = "embedding.pt";
constexpr absl::string_view kHeadFile = "head.pt";
constexpr absl::string_view kLossFile = "loss.pt";
constexpr absl::string_view kBlockPrefix = "block-";
constexpr absl::string_view kSuffix = ".pt";

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

// The block files' numbers, each file's name by its number; refuses any
// other file ending in .pt.
absl::StatusOr<std::map<int, std::string>> BlockFiles(
    const Directory& modules) {
  ASSIGN_OR_RETURN(const std::vector<Directory::Entry> entries, modules.List());
  std::map<int, std::string> blocks;
  for (const Directory::Entry& entry : entries) {
    absl::string_view name = entry.name;
    if (!absl::EndsWith(name, kSuffix) || name == kEmbeddingFile ||
        name == kHeadFile || name == kLossFile) {
      continue;
    }
    absl::string_view number = name;
    int index = -1;
    if (!absl::ConsumePrefix(&number, kBlockPrefix) ||
        !absl::ConsumeSuffix(&number, kSuffix) || number.empty() ||
        (number.size() > 1 && number[0] == '0') ||
        !absl::SimpleAtoi(number, &index) || index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          modules.Describe(entry.name),
          ": not a piece of a model: a modules directory holds embedding.pt, "
          "block-0.pt ... block-<N-1>.pt, head.pt and loss.pt"));
    }
    blocks.emplace(index, entry.name);
  }
  if (blocks.empty()) {
    return absl::NotFoundError(
        absl::StrCat(modules.Describe("block-0.pt"),
                     ": no block: a model has at least one"));
  }
  for (int expected = 0; expected < static_cast<int>(blocks.size());
       ++expected) {
    if (blocks.count(expected) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          modules.Describe(absl::StrCat(kBlockPrefix, expected, kSuffix)),
          " is missing: blocks are numbered from 0 without gaps (",
          blocks.size(), " block files found)"));
    }
  }
  return blocks;
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
                        const std::map<int, std::string>& block_files,
                        const ScriptedProbe& probe, ScriptedModules& model) {
  at::NoGradGuard no_grad;
  const at::Tensor tokens = at::zeros({1, probe.seq_length}, at::kLong);
  ASSIGN_OR_RETURN(at::Tensor hidden,
                   Probe(modules, kEmbeddingFile, model.embedding, {tokens},
                         absl::StrCat("tokens ", ShapeOf(tokens))));
  RETURN_IF_ERROR(CheckOutput(
      modules, kEmbeddingFile, hidden, tokens, 2, probe.dtype,
      "an embedding maps token ids [batch, tokens] to [batch, tokens, "
      "hidden]"));
  model.hidden_size = hidden.size(2);
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    const std::string& name = block_files.at(static_cast<int>(i));
    ASSIGN_OR_RETURN(at::Tensor out,
                     Probe(modules, name, model.blocks[i], {hidden},
                           absl::StrCat("x ", ShapeOf(hidden))));
    RETURN_IF_ERROR(CheckOutput(modules, name, out, hidden, 3, probe.dtype,
                                "a block returns its input's shape"));
    hidden = std::move(out);
  }
  ASSIGN_OR_RETURN(const at::Tensor logits,
                   Probe(modules, kHeadFile, model.head, {hidden},
                         absl::StrCat("x ", ShapeOf(hidden))));
  RETURN_IF_ERROR(CheckOutput(
      modules, kHeadFile, logits, hidden, 2, probe.dtype,
      "a head maps [batch, tokens, hidden] to logits [batch, tokens, vocab]"));
  model.vocab_size = logits.size(2);
  ASSIGN_OR_RETURN(const at::Tensor loss,
                   Probe(modules, kLossFile, model.loss, {logits, tokens},
                         absl::StrCat("logits ", ShapeOf(logits), ", targets ",
                                      ShapeOf(tokens))));
  if (loss.dim() == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      modules.Describe(kLossFile), ": returned a tensor of shape ",
      ShapeOf(loss), "; a loss returns a scalar, the sum over the tokens"));
}

}  // namespace

absl::StatusOr<ScriptedModules> LoadScriptedModules(
    const Directory& modules, const ScriptedProbe& probe) {
  if (probe.seq_length <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_length must be > 0, got ", probe.seq_length));
  }
  ASSIGN_OR_RETURN(const auto block_files, BlockFiles(modules));
  ScriptedModules model;
  ASSIGN_OR_RETURN(model.embedding,
                   LoadFile(modules, kEmbeddingFile, probe.dtype));
  RETURN_IF_ERROR(CheckHasParameters(modules, kEmbeddingFile, model.embedding));
  for (const auto& [index, name] : block_files) {
    ASSIGN_OR_RETURN(torch::jit::Module block,
                     LoadFile(modules, name, probe.dtype));
    RETURN_IF_ERROR(CheckHasParameters(modules, name, block));
    model.blocks.push_back(std::move(block));
  }
  ASSIGN_OR_RETURN(model.head, LoadFile(modules, kHeadFile, probe.dtype));
  RETURN_IF_ERROR(CheckHasParameters(modules, kHeadFile, model.head));
  ASSIGN_OR_RETURN(model.loss, LoadFile(modules, kLossFile, probe.dtype));
  RETURN_IF_ERROR(ProbeModel(modules, block_files, probe, model));
  return model;
}

}  // namespace chimera::worker
