#include "jobspec/job_validator.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/directory.h"
#include "common/file_reader.h"
#include "common/megatron_index.h"
#include "common/root_path.h"
#include "common/safetensors.h"
#include "common/status_macros.h"
#include "common/torchscript_layout.h"
#include "common/unique_fd.h"
#include "jobspec/yaml_message.h"
#include "schedule/params_proto.h"
#include "schedule/program.h"

namespace chimera::jobspec {
namespace {

using chimera::v1::TrainJob;

// Bounds that keep a typo (an extra zero or three) from reaching a worker as
// a model that cannot be built.
constexpr int kMaxLayers = 10000;
constexpr int kMaxHiddenSize = 1 << 17;
constexpr int kMaxSeqLength = 1 << 20;
constexpr int kMaxVocabSize = 1 << 24;
// The ids a 2-byte (uint16) token file can hold.
constexpr int kMaxTwoByteVocab = 1 << 16;
// Kubernetes' bounds on labels.
constexpr int kMaxLabels = 64;
constexpr size_t kMaxLabelLength = 63;
// Far above any real job file, far below what would slow every list.
constexpr size_t kMaxJobBytes = 64 << 10;
// Byte-level text needs one id per byte value.
constexpr int kByteVocab = 256;
constexpr int kMaxNameLength = 63;
constexpr int kMaxThreadsPerWorker = 4096;
// A growth that must make a job 11 times faster is a typo for a percentage.
constexpr double kMaxGrowThreshold = 10;

// Records problems against paths below one prefix ("spec.model").
class Checker {
 public:
  Checker(FieldErrors* errors, std::string prefix)
      : errors_(errors), prefix_(std::move(prefix)) {}

  std::string Path(absl::string_view field) const {
    return absl::StrCat(prefix_, ".", field);
  }
  void Fail(absl::string_view field, absl::string_view message) {
    errors_->Add(Path(field), message);
  }

  // A required positive number: 0 (unset) is reported as missing.
  void Required(absl::string_view field, int64_t value, int64_t max = 0) {
    if (value == 0) {
      Fail(field, "is required and must be > 0");
    } else {
      InRange(field, value, 1, max);
    }
  }
  // False, having failed the field, for NaN and infinity, which no field
  // means (they reach us through the API; YAML refuses them already).
  bool Finite(absl::string_view field, double value) {
    if (std::isfinite(value)) return true;
    Fail(field, absl::StrCat(value, " is not a finite number"));
    return false;
  }
  void NonNegative(absl::string_view field, double value) {
    if (Finite(field, value) && value < 0) {
      Fail(field, absl::StrCat(value, " must be >= 0"));
    }
  }
  // [min, max], or [min, inf) when max is 0.
  void InRange(absl::string_view field, int64_t value, int64_t min,
               int64_t max) {
    if (value < min) {
      Fail(field, absl::StrCat(value, " must be >= ", min));
    } else if (max > 0 && value > max) {
      Fail(field, absl::StrCat(value, " must be <= ", max));
    }
  }
  // [0, 1) for rates and coefficients.
  void UnitInterval(absl::string_view field, double value) {
    if (Finite(field, value) && (value < 0 || value >= 1)) {
      Fail(field, absl::StrCat(value, " must be in [0, 1)"));
    }
  }
  // `value` must be one of `allowed`; empty is accepted unless required.
  void OneOf(absl::string_view field, const std::string& value,
             std::initializer_list<absl::string_view> allowed,
             bool required) {
    if (value.empty()) {
      if (required) {
        Fail(field, absl::StrCat("is required; use one of ",
                                 absl::StrJoin(allowed, ", ")));
      }
      return;
    }
    for (absl::string_view name : allowed) {
      if (value == name) return;
    }
    Fail(field, absl::StrCat("'", value, "' is not one of ",
                             absl::StrJoin(allowed, ", ")));
  }

 private:
  FieldErrors* errors_;
  std::string prefix_;
};

bool IsDnsLabel(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  if (!absl::ascii_islower(name.front()) || name.back() == '-') return false;
  for (char c : name) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-') {
      return false;
    }
  }
  return true;
}

// Labels as Kubernetes bounds them, so that no job's metadata can swell
// every client's list.
void CheckLabels(const chimera::v1::ObjectMeta& metadata, FieldErrors* errors) {
  if (metadata.labels_size() > kMaxLabels) {
    errors->Add("metadata.labels", absl::StrCat(metadata.labels_size(),
                                                " labels; at most ", kMaxLabels));
    return;
  }
  for (const auto& [key, value] : metadata.labels()) {
    if (key.empty() || key.size() > kMaxLabelLength || value.size() > kMaxLabelLength) {
      errors->Add("metadata.labels",
                  absl::StrCat("a label of a ", key.size(), "-character key and a ",
                               value.size(), "-character value; keys have 1 to ",
                               kMaxLabelLength, " characters, values at most ",
                               kMaxLabelLength));
    }
  }
}

void CheckEnvelope(const TrainJob& job, FieldErrors* errors) {
  CheckApiVersionAndKind(job.api_version(), job.kind(), kTrainJobKind, errors);
  const std::string& name = job.metadata().name();
  if (!IsDnsLabel(name)) {
    errors->Add("metadata.name",
                absl::StrCat(name.size() > static_cast<size_t>(kMaxNameLength)
                                 ? absl::StrCat(name.size(), " characters")
                                 : absl::StrCat("'", name, "'"),
                             " must be 1-63 lower-case letters, digits or "
                             "'-', starting with a letter and not ending "
                             "with '-'"));
  }
  CheckLabels(job.metadata(), errors);
}

// Llama 3.1's rope scaling: a factor of at least 1, and frequency factors
// (their defaults filled in) that leave a band between them.
void CheckRopeScaling(const chimera::v1::RopeScaling& scaling, Checker& check) {
  if (check.Finite("ropeScaling.factor", scaling.factor()) &&
      scaling.factor() < 1) {
    check.Fail("ropeScaling.factor",
               absl::StrCat(scaling.factor(),
                            " must be >= 1 (1 turns the scaling off)"));
  }
  const bool low_finite =
      check.Finite("ropeScaling.lowFreqFactor", scaling.low_freq_factor());
  const bool high_finite =
      check.Finite("ropeScaling.highFreqFactor", scaling.high_freq_factor());
  if (low_finite && scaling.low_freq_factor() < 0) {
    check.Fail("ropeScaling.lowFreqFactor",
               absl::StrCat(scaling.low_freq_factor(), " must be >= 0"));
  }
  const double low =
      scaling.low_freq_factor() > 0 ? scaling.low_freq_factor() : 1;
  const double high =
      scaling.high_freq_factor() > 0 ? scaling.high_freq_factor() : 4;
  if (low_finite && high_finite && high <= low) {
    check.Fail("ropeScaling.highFreqFactor",
               absl::StrCat(high, " must be above lowFreqFactor (", low,
                            "); 0 means 4"));
  }
  check.InRange("ropeScaling.originalMaxPositionEmbeddings",
                scaling.original_max_position_embeddings(), 0, 0);
}

// Grouped-query heads and rotary embeddings: Llama's, refused elsewhere.
// Tied embeddings: the decoders' (GPT-2 and Llama 3.2 tie theirs).
void CheckLlamaFields(const chimera::v1::ModelSpec& model, Checker& check) {
  if (model.family() != "gpt" && model.family() != "llama" &&
      model.tie_embeddings()) {
    check.Fail("tieEmbeddings", "is for families 'gpt' and 'llama' only");
  }
  if (model.family() != "llama") {
    if (model.num_kv_heads() != 0) {
      check.Fail("numKvHeads", "is for family 'llama' only");
    }
    if (model.rope_theta() != 0) {
      check.Fail("ropeTheta", "is for family 'llama' only");
    }
    if (model.has_rope_scaling()) {
      check.Fail("ropeScaling", "is for family 'llama' only");
    }
    return;
  }
  check.InRange("numKvHeads", model.num_kv_heads(), 0, kMaxHiddenSize);
  if (model.num_kv_heads() > 0 && model.num_heads() > 0 &&
      model.num_heads() % model.num_kv_heads() != 0) {
    check.Fail("numKvHeads",
               absl::StrCat(model.num_kv_heads(), " does not divide numHeads (",
                            model.num_heads(), ")"));
  }
  if (model.hidden_size() > 0 && model.num_heads() > 0 &&
      model.hidden_size() % model.num_heads() == 0 &&
      model.hidden_size() / model.num_heads() % 2 != 0) {
    check.Fail(
        "numHeads",
        absl::StrCat("gives heads of ", model.hidden_size() / model.num_heads(),
                     " dimensions; rotary embeddings need an even "
                     "number (hiddenSize / numHeads)"));
  }
  if (check.Finite("ropeTheta", model.rope_theta()) &&
      model.rope_theta() != 0 && model.rope_theta() <= 1) {
    check.Fail("ropeTheta",
               absl::StrCat(model.rope_theta(),
                            " must be > 1 (0 means 10000), so that rotation "
                            "frequencies fall along a head"));
  }
  if (model.has_rope_scaling()) CheckRopeScaling(model.rope_scaling(), check);
}

void CheckModel(const chimera::v1::JobSpec& spec, FieldErrors* errors) {
  const auto& model = spec.model();
  Checker check(errors, "spec.model");
  check.OneOf("family", model.family(), {"gpt", "bert", "llama", "torchscript"},
              true);
  check.Required("numLayers", model.num_layers(), kMaxLayers);
  check.Required("hiddenSize", model.hidden_size(), kMaxHiddenSize);
  check.Required("numHeads", model.num_heads(), kMaxHiddenSize);
  check.Required("seqLength", model.seq_length(), kMaxSeqLength);
  check.InRange("ffnSize", model.ffn_size(), 0, 4 * kMaxHiddenSize);
  check.InRange("vocabSize", model.vocab_size(), 0, kMaxVocabSize);
  if (model.hidden_size() > 0 && model.num_heads() > 0 &&
      model.hidden_size() % model.num_heads() != 0) {
    check.Fail("hiddenSize",
               absl::StrCat(model.hidden_size(),
                            " is not divisible by numHeads (",
                            model.num_heads(), ")"));
  }
  CheckLlamaFields(model, check);
  check.OneOf("dtype", model.dtype(), {"float32", "float64", "bfloat16"},
              false);
  if (model.dtype() == "bfloat16" && spec.resources().device() != "gpu") {
    check.Fail("dtype", "bfloat16 needs resources.device 'gpu'");
  }
  const std::string& format = spec.data().format();
  if (format == "text" && model.vocab_size() != 0 &&
      model.vocab_size() < kByteVocab) {
    check.Fail("vocabSize",
               absl::StrCat(model.vocab_size(), " must be >= ", kByteVocab,
                            " for data format 'text' (byte-level tokens)"));
  }
  const int token_bytes = spec.data().token_bytes();
  if (format == "tokens" && (token_bytes == 0 || token_bytes == 2) &&
      model.vocab_size() > kMaxTwoByteVocab) {
    check.Fail(
        "vocabSize",
        absl::StrCat(model.vocab_size(), " must be <= ", kMaxTwoByteVocab,
                     " for 2-byte (uint16) token ids; a larger "
                     "vocabulary needs spec.data.tokenBytes: 4"));
  }
}

// A text file must be text and hold at least `min_tokens` bytes.
void CheckTextFile(const std::string& file, absl::string_view shown,
                   uint64_t size, uint64_t min_tokens, Checker& check) {
  absl::StatusOr<std::string> head = ReadFilePrefix(file, kTextDataSniffBytes);
  const absl::Status text =
      head.ok() ? CheckTextDataHead(shown, *head) : head.status();
  if (!text.ok()) {
    check.Fail("path", text.message());
  } else if (size < min_tokens) {
    check.Fail("path",
               absl::StrCat("'", shown, "' holds ", size,
                            " bytes, fewer than seqLength + 1 = ", min_tokens));
  }
}

// A tokens file must hold a whole number of ids, at least `min_tokens`.
void CheckTokenFile(absl::string_view shown, uint64_t size, int token_bytes,
                    uint64_t min_tokens, Checker& check) {
  if (size % token_bytes != 0) {
    check.Fail("path", absl::StrCat("'", shown, "' is ", size,
                                    " bytes, not a whole number of ",
                                    token_bytes, "-byte token ids"));
  } else if (size / token_bytes < min_tokens) {
    check.Fail("path", absl::StrCat(
                           "'", shown, "' holds ", size / token_bytes,
                           " tokens, fewer than seqLength + 1 = ", min_tokens));
  }
}

// A text or tokens file: regular, non-empty, under kMaxDataFileBytes.
void CheckFlatFile(const chimera::v1::DataSpec& data, const std::string& file,
                   uint64_t min_tokens, Checker& check) {
  absl::StatusOr<uint64_t> size = RegularFileSize(file);
  if (!size.ok()) {
    check.Fail("path", size.status().message());
  } else if (*size == 0) {
    check.Fail("path", absl::StrCat("'", data.path(), "' is empty"));
  } else if (*size > kMaxDataFileBytes) {
    check.Fail("path", absl::StrCat("'", data.path(), "' is ", *size,
                                    " bytes, more than the ",
                                    kMaxDataFileBytes, "-byte limit"));
  } else if (data.format() == "text") {
    CheckTextFile(file, data.path(), *size, min_tokens, check);
  } else {
    CheckTokenFile(data.path(), *size,
                   data.token_bytes() > 0 ? data.token_bytes() : 2, min_tokens,
                   check);
  }
}

// A Megatron dataset: PREFIX.idx valid and describing PREFIX.bin, which
// holds at least `min_tokens`.
void CheckMegatronDataset(const chimera::v1::DataSpec& data,
                          const std::string& prefix, uint64_t min_tokens,
                          Checker& check) {
  const std::string index_shown = MegatronIndexPath(data.path());
  const UniqueFd index_fd(::open(MegatronIndexPath(prefix).c_str(),
                                 O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!index_fd.valid()) {
    check.Fail("path",
               absl::StrCat("index file '", index_shown,
                            "' cannot be opened: ", std::strerror(errno)));
    return;
  }
  const absl::StatusOr<uint64_t> size =
      RegularFileSize(MegatronDataPath(prefix));
  if (!size.ok()) {
    check.Fail("path", size.status().message());
    return;
  }
  const absl::StatusOr<MegatronIndex> index =
      InspectMegatronDataset(index_fd.get(), *size, data.path());
  if (!index.ok()) {
    check.Fail("path", index.status().message());
  } else if (index->tokens < min_tokens) {
    check.Fail("path", absl::StrCat(
                           "'", MegatronDataPath(data.path()), "' holds ",
                           index->tokens,
                           " tokens, fewer than seqLength + 1 = ", min_tokens));
  }
}

// The data must hold at least one sample: seqLength + 1 tokens (inputs plus
// the shifted targets).
void CheckDataFile(const chimera::v1::JobSpec& spec, const std::string& root,
                   Checker& check) {
  const auto& data = spec.data();
  const std::string file = (std::filesystem::path(root) / data.path()).string();
  const uint64_t min_tokens =
      static_cast<uint64_t>(spec.model().seq_length()) + 1;
  if (data.format() == "megatron") {
    CheckMegatronDataset(data, file, min_tokens, check);
  } else {
    CheckFlatFile(data, file, min_tokens, check);
  }
}

// tokenBytes is given only for a tokens file, and is 2 or 4 there.
bool TokenBytesValid(const chimera::v1::DataSpec& data, Checker& check) {
  const int token_bytes = data.token_bytes();
  if (token_bytes != 0 && data.format() != "tokens") {
    check.Fail("tokenBytes",
               absl::StrCat("is for format 'tokens'; ",
                            data.format() == "megatron"
                                ? "a Megatron dataset's index names its type"
                                : "leave it out"));
    return false;
  }
  if (token_bytes != 0 && token_bytes != 2 && token_bytes != 4) {
    check.Fail("tokenBytes",
               absl::StrCat(token_bytes, " is not 2 (uint16) or 4 (uint32)"));
    return false;
  }
  return true;
}

// A Megatron dataset is named as Megatron's --data-path names it, by the
// prefix its two files share; false when `path` is not one.
bool CheckMegatronPrefix(absl::string_view path, Checker& check) {
  for (absl::string_view extension : {".bin", ".idx"}) {
    if (absl::EndsWith(path, extension)) {
      check.Fail("path",
                 absl::StrCat("'", path,
                              "' names one of the dataset's files; "
                              "give the prefix they share, '",
                              path.substr(0, path.size() - extension.size()),
                              "' (the dataset is PREFIX.bin and PREFIX.idx)"));
      return false;
    }
  }
  return true;
}

// initFrom: a llama or tied gpt job's (those with a Hugging Face layout),
// root-relative, and (when files are checked) a directory holding a valid
// safetensors file.
void CheckInitFrom(const chimera::v1::JobSpec& spec,
                   const ValidationOptions& options, FieldErrors* errors) {
  const std::string& dir = spec.model().init_from();
  if (dir.empty()) return;
  Checker check(errors, "spec.model");
  const std::string& family = spec.model().family();
  if (family != "llama" &&
      !(family == "gpt" && spec.model().tie_embeddings())) {
    check.Fail("initFrom",
               "is for the models with a Hugging Face layout: family 'llama', "
               "and 'gpt' with tieEmbeddings: true (GPT-2's)");
    return;
  }
  if (const absl::Status relative = CheckRootRelative(dir); !relative.ok()) {
    check.Fail("initFrom", relative.message());
    return;
  }
  if (!options.check_data_files) return;
  const std::string file =
      (std::filesystem::path(options.data_root) / dir / kSafetensorsModelFile)
          .string();
  const absl::Status header = ReadSafetensorsHeader(file).status();
  if (!header.ok()) {
    check.Fail("initFrom", absl::StrCat("'", dir, "/", kSafetensorsModelFile,
                                        "': ", header.message()));
  }
}

// The block files of the TorchScript pieces in `modules` under `data_root`.
absl::StatusOr<std::vector<std::string>> ModulesBlockFiles(
    const std::string& data_root, const std::string& modules) {
  ASSIGN_OR_RETURN(const Directory root,
                   Directory::OpenRoot(data_root.empty() ? "." : data_root));
  ASSIGN_OR_RETURN(const Directory directory,
                   root.Open(modules, /*create=*/false));
  return ScriptedPieceFiles(directory);
}

// modules: a torchscript job's, and required there; root-relative, and
// (when files are checked) a directory of pieces with numLayers blocks.
void CheckModules(const chimera::v1::JobSpec& spec,
                  const ValidationOptions& options, FieldErrors* errors) {
  const chimera::v1::ModelSpec& model = spec.model();
  Checker check(errors, "spec.model");
  if (model.family() != "torchscript") {
    if (!model.modules().empty()) {
      check.Fail("modules", "is for family 'torchscript' only");
    }
    return;
  }
  if (model.modules().empty()) {
    check.Fail("modules",
               "is required for family 'torchscript': the directory of the "
               "model's TorchScript pieces (scripts/export-torchscript "
               "writes one)");
    return;
  }
  if (const absl::Status relative = CheckRootRelative(model.modules());
      !relative.ok()) {
    check.Fail("modules", relative.message());
    return;
  }
  if (!options.check_data_files) return;
  const absl::StatusOr<std::vector<std::string>> blocks =
      ModulesBlockFiles(options.data_root, model.modules());
  if (!blocks.ok()) {
    check.Fail("modules", blocks.status().message());
  } else if (static_cast<int64_t>(blocks->size()) != model.num_layers()) {
    check.Fail("modules",
               absl::StrCat("'", model.modules(), "' holds ", blocks->size(),
                            " blocks (block-0.pt ... ", blocks->back(),
                            "); numLayers is ", model.num_layers()));
  }
}

void CheckData(const chimera::v1::JobSpec& spec,
               const ValidationOptions& options, FieldErrors* errors) {
  const auto& data = spec.data();
  Checker check(errors, "spec.data");
  check.OneOf("format", data.format(),
              {"text", "tokens", "megatron", "synthetic"}, true);
  if (!TokenBytesValid(data, check)) return;
  if (data.format() == "synthetic") {
    if (!data.path().empty()) check.Fail("path", "must be empty for format 'synthetic'");
    return;
  }
  if (data.format() != "text" && data.format() != "tokens" &&
      data.format() != "megatron") {
    return;
  }
  if (data.path().empty()) {
    check.Fail("path", absl::StrCat("is required for format '", data.format(), "'"));
    return;
  }
  if (const absl::Status relative = CheckRootRelative(data.path()); !relative.ok()) {
    check.Fail("path", relative.message());
    return;
  }
  if (data.format() == "megatron" && !CheckMegatronPrefix(data.path(), check)) {
    return;
  }
  if (options.check_data_files) CheckDataFile(spec, options.data_root, check);
}

void CheckTraining(const chimera::v1::TrainingSpec& training,
                   FieldErrors* errors) {
  Checker check(errors, "spec.training");
  check.Required("globalBatchSize", training.global_batch_size());
  check.NonNegative("microBatchSize", training.micro_batch_size());
  check.Required("maxSteps", training.max_steps());
  check.NonNegative("checkpointEvery", training.checkpoint_every());
  if (training.checkpoint_every() > 0 && training.checkpoint_dir().empty()) {
    check.Fail("checkpointDir", "is required when checkpointEvery > 0");
  }
  if (const absl::Status relative = CheckRootRelative(training.checkpoint_dir());
      !relative.ok()) {
    check.Fail("checkpointDir", relative.message());
  }
  const auto& optimizer = training.optimizer();
  Checker opt(errors, "spec.training.optimizer");
  opt.OneOf("name", optimizer.name(), {"sgd", "adamw"}, true);
  if (opt.Finite("lr", optimizer.lr()) && optimizer.lr() <= 0) {
    opt.Fail("lr", absl::StrCat(optimizer.lr(), " must be > 0"));
  }
  opt.UnitInterval("momentum", optimizer.momentum());
  opt.NonNegative("weightDecay", optimizer.weight_decay());
  opt.UnitInterval("beta1", optimizer.beta1());
  opt.UnitInterval("beta2", optimizer.beta2());
  opt.NonNegative("eps", optimizer.eps());
}

// data x microBatchSize x microBatches must make the global batch; where
// some of them are left to the planner, the given ones must divide it.
void CheckBatchArithmetic(const chimera::v1::JobSpec& spec,
                          FieldErrors* errors) {
  const auto& parallelism = spec.parallelism();
  const int64_t global = spec.training().global_batch_size();
  if (global <= 0) return;
  std::vector<std::string> factors;
  int64_t product = 1;
  // Multiplying stops once the product passes the global batch: three int32
  // factors can overflow even 64 bits.
  bool larger = false;
  int given = 0;
  auto use = [&](bool present, int64_t value, absl::string_view name) {
    if (!present || value <= 0) return;
    factors.push_back(absl::StrCat(name, " (", value, ")"));
    ++given;
    if (larger || product > global / value) {
      larger = true;
      return;
    }
    product *= value;
  };
  use(parallelism.has_data(), parallelism.data(), "data");
  use(true, spec.training().micro_batch_size(), "microBatchSize");
  use(parallelism.has_micro_batches(), parallelism.micro_batches(),
      "microBatches");
  if (given == 0) return;
  const std::string made = absl::StrJoin(factors, " x ");
  if (larger) {
    errors->Add("spec.training.globalBatchSize",
                absl::StrCat(global, " cannot be made from ", made,
                             ": their product is larger"));
  } else if (given == 3 && product != global) {
    errors->Add("spec.training.globalBatchSize",
                absl::StrCat(global, " cannot be made from ", made, " = ",
                             product));
  } else if (global % product != 0) {
    errors->Add("spec.training.globalBatchSize",
                absl::StrCat(global, " is not a multiple of ", made,
                             given > 1 ? absl::StrCat(" = ", product) : ""));
  }
}

// PipeDream runs a micro-batch's forward on each stage on the newest
// weights there, so its first and last stages run it on different versions:
// a weight tied across them would be two weights.
bool TiesWeightsItRunsOnDifferentVersions(const chimera::v1::JobSpec& spec,
                                          schedule::Scheme scheme) {
  return scheme == schedule::Scheme::kPipeDream &&
         spec.model().tie_embeddings();
}

// An asynchronous schedule trains only with consent, and PipeDream only
// with untied embeddings.
void CheckAsynchronous(const chimera::v1::JobSpec& spec,
                       schedule::Scheme scheme, FieldErrors* errors) {
  const std::string name = schedule::SchemeName(scheme);
  if (!spec.parallelism().allow_asynchronous()) {
    errors->Add(
        "spec.parallelism.schedule",
        absl::StrCat("'", name, "' is asynchronous: its micro-batches run on ",
                     scheme == schedule::Scheme::kPipeDream
                         ? "weights a few updates old, each micro-batch an "
                           "update of its own"
                         : "weights one update old",
                     ", so it trains to other weights than mini-batch SGD; "
                     "set spec.parallelism.allowAsynchronous: true to train "
                     "with it"));
  }
  if (TiesWeightsItRunsOnDifferentVersions(spec, scheme)) {
    errors->Add("spec.model.tieEmbeddings",
                "pipedream runs a micro-batch on a newer version of the "
                "weights on its last stage than on its first, so an embedding "
                "tied across them would be two weights: set it false, or use "
                "pipedream-2bw, whose stages share each step's version");
  }
}

// With replicated stages each micro-batch is cut into as many slices as the
// least common multiple of the replication, one sample at least each.
void CheckSlices(const chimera::v1::JobSpec& spec,
                 const schedule::SpecParams& fixed, FieldErrors* errors) {
  const int given = spec.training().micro_batch_size();
  const int64_t per_replica =
      fixed.Gives(schedule::ScheduleParam::kWidth) &&
              fixed.Gives(schedule::ScheduleParam::kMicroBatches)
          ? int64_t{fixed.params.width} * fixed.params.micro_batches
          : 0;
  const int64_t size = given > 0 ? given
                       : per_replica > 0
                           ? spec.training().global_batch_size() / per_replica
                           : 0;
  if (size <= 0) return;
  const absl::StatusOr<int> slice =
      schedule::SliceSize(static_cast<int>(size), fixed.params.replication);
  if (!slice.ok()) {
    errors->Add(given > 0 ? "spec.training.microBatchSize"
                          : "spec.parallelism.replication",
                absl::StrCat(given > 0 ? "" : "the micro-batch size ",
                             slice.status().message()));
  }
}

// The schedule rules live with the schedule engine (one translation of
// spec.parallelism for every caller); what it cannot know is the model.
void CheckParallelism(const chimera::v1::JobSpec& spec, FieldErrors* errors) {
  const auto& parallelism = spec.parallelism();
  schedule::SpecParams fixed;
  errors->Append(
      schedule::ScheduleParamsFromSpec(parallelism, spec.training(), &fixed));
  if (fixed.Gives(schedule::ScheduleParam::kScheme) &&
      schedule::IsAsynchronous(fixed.params.scheme)) {
    CheckAsynchronous(spec, fixed.params.scheme, errors);
  }
  if (!fixed.params.replication.empty()) CheckSlices(spec, fixed, errors);
  const int num_layers = spec.model().num_layers();
  const int chunks = schedule::ChunksPerWorker(fixed.params);
  // In 64 bits: both factors are the spec's, of any size.
  const int64_t stages = int64_t{fixed.params.depth} * chunks;
  if (fixed.Gives(schedule::ScheduleParam::kDepth) && num_layers > 0 &&
      stages > num_layers) {
    errors->Add("spec.parallelism.pipeline",
                absl::StrCat(fixed.params.depth,
                             chunks > 1 ? absl::StrCat(" x ", chunks, " chunks = ", stages)
                                        : "",
                             " stages need at least as many layers; "
                             "spec.model.numLayers is ",
                             num_layers));
  }
}

void CheckResources(const chimera::v1::JobSpec& spec, FieldErrors* errors) {
  const auto& resources = spec.resources();
  const auto& parallelism = spec.parallelism();
  Checker check(errors, "spec.resources");
  // 0 leaves them open: all the cluster's devices, or all idle workers.
  check.NonNegative("workers", resources.workers());
  check.OneOf("device", resources.device(), {"cpu", "gpu"}, false);
  // Workers use at most their cores; beyond this the number is a mistake.
  check.InRange("threadsPerWorker", resources.threads_per_worker(), 0,
                kMaxThreadsPerWorker);
  check.NonNegative("memoryBytesPerWorker", resources.memory_bytes_per_worker());
  const int workers = resources.workers();
  if (workers <= 0) return;
  const int per_pipeline = jobspec::WorkersPerPipeline(parallelism);
  const std::string pipeline =
      parallelism.replication().empty()
          ? absl::StrCat("pipeline (", per_pipeline, ")")
          : absl::StrCat("the ", per_pipeline, " workers of replication ",
                         parallelism.replication());
  const bool has_depth = per_pipeline > 0;
  const bool has_width = parallelism.has_data() && parallelism.data() > 0;
  const int64_t pipeline_x_data = int64_t{per_pipeline} * parallelism.data();
  if (has_depth && has_width && workers != pipeline_x_data) {
    check.Fail("workers",
               absl::StrCat(workers, " must equal data (", parallelism.data(),
                            ") x ", pipeline, " = ", pipeline_x_data));
  } else if (has_depth && !has_width && workers % per_pipeline != 0) {
    check.Fail("workers",
               absl::StrCat(workers, " is not a multiple of ", pipeline));
  } else if (has_width && !has_depth && workers % parallelism.data() != 0) {
    check.Fail("workers", absl::StrCat(workers, " is not a multiple of data (",
                                       parallelism.data(), ")"));
  }
}

// An elastic job: the fewest workers it may go on with after a restart.
void CheckMinWorkers(const chimera::v1::JobSpec& spec, FieldErrors* errors) {
  const int min_workers = spec.resources().min_workers();
  if (min_workers == 0) return;
  Checker check(errors, "spec.resources");
  const int workers = spec.resources().workers();
  if (min_workers < 0) {
    check.Fail("minWorkers", absl::StrCat(min_workers, " must be >= 0"));
  } else if (workers <= 0) {
    check.Fail("minWorkers",
               "needs spec.resources.workers: the count the job starts on");
  } else if (min_workers > workers) {
    check.Fail("minWorkers", absl::StrCat(min_workers, " must be <= workers (",
                                          workers, ")"));
  } else if (min_workers < workers && spec.run_policy().backoff_limit() == 0) {
    // Only a restart goes on with fewer workers.
    check.Fail("minWorkers",
               absl::StrCat(min_workers,
                            " lets the job go on with fewer "
                            "workers when it restarts, but "
                            "spec.runPolicy.backoffLimit is 0: it never does"));
  }
}

void CheckRunPolicy(const chimera::v1::RunPolicy& policy, FieldErrors* errors) {
  Checker check(errors, "spec.runPolicy");
  check.NonNegative("backoffLimit", policy.backoff_limit());
  check.NonNegative("activeDeadlineSeconds",
                    static_cast<double>(policy.active_deadline_seconds()));
  if (policy.has_grow_threshold() &&
      check.Finite("growThreshold", policy.grow_threshold()) &&
      (policy.grow_threshold() < 0 ||
       policy.grow_threshold() > kMaxGrowThreshold)) {
    check.Fail("growThreshold",
               absl::StrCat(policy.grow_threshold(), " must be in [0, ",
                            kMaxGrowThreshold, "] (a fraction: 0.1 is 10 %)"));
  }
  if (policy.replace_stragglers() && policy.backoff_limit() == 0) {
    // Only a restart goes on without the straggler.
    check.Fail("replaceStragglers",
               "true restarts the job without a straggling rank's worker, but "
               "spec.runPolicy.backoffLimit is 0: it never does");
  }
}

}  // namespace

int WorkersPerPipeline(const chimera::v1::ParallelismSpec& parallelism) {
  const int depth =
      parallelism.has_pipeline() ? std::max(0, parallelism.pipeline()) : 0;
  if (parallelism.replication().empty()) return depth;
  const absl::StatusOr<std::vector<int>> replication =
      schedule::ParseReplication(parallelism.replication());
  return replication.ok() ? schedule::WorkersPerPipeline(depth, *replication)
                          : 0;
}

bool AllowsAsynchronousScheme(const chimera::v1::JobSpec& spec,
                              schedule::Scheme scheme) {
  return spec.parallelism().allow_asynchronous() &&
         !TiesWeightsItRunsOnDifferentVersions(spec, scheme);
}

FieldErrors ValidateJob(const TrainJob& job, const ValidationOptions& options) {
  FieldErrors errors;
  // Every string and map of a job is bounded by this, and none of its
  // messages can echo more.
  if (job.ByteSizeLong() > kMaxJobBytes) {
    errors.Add("", absl::StrCat("the job is ", job.ByteSizeLong(), " bytes; at most ",
                                kMaxJobBytes));
    return errors;
  }
  CheckEnvelope(job, &errors);
  if (!job.has_spec()) {
    errors.Add("spec", "is required");
    return errors;
  }
  const auto& spec = job.spec();
  CheckModel(spec, &errors);
  CheckInitFrom(spec, options, &errors);
  CheckModules(spec, options, &errors);
  CheckData(spec, options, &errors);
  CheckTraining(spec.training(), &errors);
  CheckBatchArithmetic(spec, &errors);
  CheckParallelism(spec, &errors);
  CheckResources(spec, &errors);
  CheckMinWorkers(spec, &errors);
  CheckRunPolicy(spec.run_policy(), &errors);
  return errors;
}

}  // namespace chimera::jobspec
