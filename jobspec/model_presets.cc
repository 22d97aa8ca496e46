#include "jobspec/model_presets.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spelling.h"

namespace chimera::jobspec {
namespace {

// Llama 3.1's rope scaling, in Hugging Face's fields; a factor of 1 is none.
struct RopeScaling {
  double factor, low_freq_factor, high_freq_factor;
  int original_max_position_embeddings;
};

constexpr RopeScaling kNoScaling{1, 0, 0, 0};
constexpr RopeScaling kLlama31Scaling{8, 1, 4, 8192};
constexpr RopeScaling kLlama32Scaling{32, 1, 4, 8192};

struct ModelPreset {
  const char* name;
  const char* family;
  int num_layers, hidden_size, ffn_size, num_heads, num_kv_heads, vocab_size,
      seq_length;
  double rope_theta;
  bool tie_embeddings;
  RopeScaling rope_scaling;
};

// GPT-2's have no key/value heads or rotary base of their own (0).
constexpr ModelPreset kPresets[] = {
    {"gpt2", "gpt", 12, 768, 3072, 12, 0, 50257, 1024, 0, true, kNoScaling},
    {"gpt2-medium", "gpt", 24, 1024, 4096, 16, 0, 50257, 1024, 0, true,
     kNoScaling},
    {"gpt2-large", "gpt", 36, 1280, 5120, 20, 0, 50257, 1024, 0, true,
     kNoScaling},
    {"gpt2-xl", "gpt", 48, 1600, 6400, 25, 0, 50257, 1024, 0, true, kNoScaling},
    {"llama2-7b", "llama", 32, 4096, 11008, 32, 32, 32000, 4096, 10000, false,
     kNoScaling},
    {"llama2-13b", "llama", 40, 5120, 13824, 40, 40, 32000, 4096, 10000, false,
     kNoScaling},
    {"llama2-70b", "llama", 80, 8192, 28672, 64, 8, 32000, 4096, 10000, false,
     kNoScaling},
    {"llama3-8b", "llama", 32, 4096, 14336, 32, 8, 128256, 8192, 500000, false,
     kNoScaling},
    {"llama3-70b", "llama", 80, 8192, 28672, 64, 8, 128256, 8192, 500000, false,
     kNoScaling},
    {"llama3.1-405b", "llama", 126, 16384, 53248, 128, 8, 128256, 8192, 500000,
     false, kLlama31Scaling},
    {"llama3.2-1b", "llama", 16, 2048, 8192, 32, 8, 128256, 8192, 500000, true,
     kLlama32Scaling},
    {"llama3.2-3b", "llama", 28, 3072, 8192, 24, 8, 128256, 8192, 500000, true,
     kLlama32Scaling},
};

const ModelPreset* FindPreset(const std::string& name) {
  for (const ModelPreset& preset : kPresets) {
    if (name == preset.name) return &preset;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const ModelPreset& preset : kPresets) names.emplace_back(preset.name);
  return names;
}

void ApplyModelPreset(chimera::v1::TrainJob* job, FieldErrors* errors) {
  if (job->spec().model().preset().empty()) return;
  chimera::v1::ModelSpec* model = job->mutable_spec()->mutable_model();
  const ModelPreset* preset = FindPreset(model->preset());
  if (preset == nullptr) {
    const std::optional<std::string> near =
        ClosestSpelling(model->preset(), ModelPresetNames());
    errors->Add(
        "spec.model.preset",
        absl::StrCat("'", model->preset(), "' is not a preset",
                     near ? absl::StrCat("; did you mean '", *near, "'?") : "",
                     " (presets: ", absl::StrJoin(ModelPresetNames(), ", "),
                     ")"));
    return;
  }
  if (!model->family().empty() && model->family() != preset->family) {
    errors->Add("spec.model.family",
                absl::StrCat("'", model->family(), "' contradicts preset '",
                             preset->name, "', a ", preset->family,
                             " model; leave the family out or make it '",
                             preset->family, "'"));
    return;
  }
  model->set_family(preset->family);
  if (model->num_layers() == 0) model->set_num_layers(preset->num_layers);
  if (model->hidden_size() == 0) model->set_hidden_size(preset->hidden_size);
  if (model->ffn_size() == 0) model->set_ffn_size(preset->ffn_size);
  if (model->num_heads() == 0) model->set_num_heads(preset->num_heads);
  if (model->num_kv_heads() == 0) {
    model->set_num_kv_heads(preset->num_kv_heads);
  }
  if (model->vocab_size() == 0) model->set_vocab_size(preset->vocab_size);
  if (model->seq_length() == 0) model->set_seq_length(preset->seq_length);
  if (model->rope_theta() == 0) model->set_rope_theta(preset->rope_theta);
  if (!model->has_tie_embeddings()) {
    model->set_tie_embeddings(preset->tie_embeddings);
  }
  const RopeScaling& scaling = preset->rope_scaling;
  if (!model->has_rope_scaling() && scaling.factor != 1) {
    chimera::v1::RopeScaling* set = model->mutable_rope_scaling();
    set->set_factor(scaling.factor);
    set->set_low_freq_factor(scaling.low_freq_factor);
    set->set_high_freq_factor(scaling.high_freq_factor);
    set->set_original_max_position_embeddings(
        scaling.original_max_position_embeddings);
  }
}

absl::StatusOr<chimera::v1::TrainJob> WithModelPreset(
    chimera::v1::TrainJob job) {
  FieldErrors errors;
  ApplyModelPreset(&job, &errors);
  if (!errors.empty()) return errors.ToStatus();
  return job;
}

}  // namespace chimera::jobspec
