#include "planner/model_profile.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "jobspec/yaml_message.h"

namespace chimera::planner {
namespace {

using chimera::v1::LayerProfile;
using chimera::v1::ModelProfile;

// Embedding first, head last, blocks in between.
int LayerIndexOfBlock(int block) { return block + 1; }

// The split backward's halves: both measured (> 0) or neither (0).
void ValidateHalves(const chimera::v1::LayerTiming& timing,
                    const std::string& at, FieldErrors* errors) {
  const double input = timing.backward_input_seconds();
  const double weight = timing.backward_weight_seconds();
  for (const auto& [field, value] :
       {std::pair(".backwardInputSeconds", input),
        std::pair(".backwardWeightSeconds", weight)}) {
    if (!(value >= 0) || !std::isfinite(value)) {
      errors->Add(at + field, absl::StrCat(value, " must be >= 0"));
      return;
    }
  }
  if ((input > 0) != (weight > 0)) {
    errors->Add(at + (input > 0 ? ".backwardWeightSeconds"
                                : ".backwardInputSeconds"),
                "0 while the other half is measured: give both halves or "
                "neither");
  }
}

void ValidateLayer(const LayerProfile& layer, const std::string& path,
                   FieldErrors* errors) {
  if (layer.timings().empty()) {
    errors->Add(path + ".timings", "needs at least one micro-batch size");
  }
  int previous_size = 0;
  for (int i = 0; i < layer.timings_size(); ++i) {
    const auto& timing = layer.timings(i);
    const std::string at = absl::StrCat(path, ".timings[", i, "]");
    if (timing.micro_batch_size() <= previous_size) {
      errors->Add(at + ".microBatchSize",
                  absl::StrCat(timing.micro_batch_size(),
                               " must be > 0 and larger than the previous "
                               "entry's"));
    }
    previous_size = timing.micro_batch_size();
    if (!(timing.forward_seconds() > 0) || !std::isfinite(timing.forward_seconds())) {
      errors->Add(at + ".forwardSeconds",
                  absl::StrCat(timing.forward_seconds(), " must be > 0"));
    }
    if (!(timing.backward_seconds() > 0) || !std::isfinite(timing.backward_seconds())) {
      errors->Add(at + ".backwardSeconds",
                  absl::StrCat(timing.backward_seconds(), " must be > 0"));
    }
    ValidateHalves(timing, at, errors);
  }
  if (layer.activation_bytes_per_sample() < 0) {
    errors->Add(path + ".activationBytesPerSample", "must be >= 0");
  }
  if (layer.output_bytes_per_sample() < 0) {
    errors->Add(path + ".outputBytesPerSample", "must be >= 0");
  }
  if (layer.backward_extra_bytes_per_sample() < 0) {
    errors->Add(path + ".backwardExtraBytesPerSample", "must be >= 0");
  }
  if (layer.parameter_bytes() < 0) {
    errors->Add(path + ".parameterBytes", "must be >= 0");
  }
  if (!(layer.optimizer_seconds() >= 0) || !std::isfinite(layer.optimizer_seconds())) {
    errors->Add(path + ".optimizerSeconds",
                absl::StrCat(layer.optimizer_seconds(), " must be >= 0"));
  }
}

}  // namespace

FieldErrors ValidateProfile(const ModelProfile& profile, int expected_blocks) {
  FieldErrors errors;
  jobspec::CheckApiVersionAndKind(profile.api_version(), profile.kind(),
                         kModelProfileKind, &errors);
  const int count = profile.layers_size();
  if (count < 3) {
    errors.Add("layers", absl::StrCat("has ", count,
                                      " entries; needs an embedding, at "
                                      "least one block and a head"));
    return errors;
  }
  for (int i = 0; i < count; ++i) {
    const std::string expected =
        i == 0 ? "embedding" : (i == count - 1 ? "head" : "block");
    const std::string path = absl::StrCat("layers[", i, "]");
    if (profile.layers(i).kind() != expected) {
      errors.Add(path + ".kind", absl::StrCat("'", profile.layers(i).kind(),
                                              "' must be '", expected, "'"));
    }
    ValidateLayer(profile.layers(i), path, &errors);
  }
  if (expected_blocks > 0 && count - 2 != expected_blocks) {
    errors.Add("layers", absl::StrCat("has ", count - 2,
                                      " blocks; the job's model has ",
                                      expected_blocks));
  }
  return errors;
}

FieldErrors LoadProfileFile(const std::string& path, int expected_blocks,
                            ModelProfile* profile) {
  FieldErrors errors = jobspec::LoadYamlMessageFile(path, profile);
  if (!errors.empty()) return errors;
  return ValidateProfile(*profile, expected_blocks);
}

namespace {

// A point's costs as they are: the halves -1 where not measured.
LayerCost CostOf(const chimera::v1::LayerTiming& point) {
  const bool split = point.backward_input_seconds() > 0;
  return {point.forward_seconds(), point.backward_seconds(),
          split ? point.backward_input_seconds() : -1,
          split ? point.backward_weight_seconds() : -1};
}

LayerCost Scaled(LayerCost cost, double factor) {
  cost.forward_seconds *= factor;
  cost.backward_seconds *= factor;
  if (cost.backward_input_seconds >= 0) {
    cost.backward_input_seconds *= factor;
    cost.backward_weight_seconds *= factor;
  }
  return cost;
}

// low + t (high - low), each cost; halves only where both points have them.
LayerCost Between(const LayerCost& low, const LayerCost& high, double t) {
  const auto mix = [t](double a, double b) { return a + t * (b - a); };
  const bool split =
      low.backward_input_seconds >= 0 && high.backward_input_seconds >= 0;
  return {mix(low.forward_seconds, high.forward_seconds),
          mix(low.backward_seconds, high.backward_seconds),
          split ? mix(low.backward_input_seconds, high.backward_input_seconds)
                : -1,
          split ? mix(low.backward_weight_seconds, high.backward_weight_seconds)
                : -1};
}

}  // namespace

LayerCost CostAt(const LayerProfile& layer, int micro_batch_size) {
  const auto& points = layer.timings();
  const double b = micro_batch_size;
  auto scaled = [b](const chimera::v1::LayerTiming& point) {
    return Scaled(CostOf(point), b / point.micro_batch_size());
  };
  if (b <= points[0].micro_batch_size()) return scaled(points[0]);
  for (int i = 1; i < points.size(); ++i) {
    const auto& low = points[i - 1];
    const auto& high = points[i];
    if (b <= high.micro_batch_size()) {
      const double t = (b - low.micro_batch_size()) /
                       (high.micro_batch_size() - low.micro_batch_size());
      return Between(CostOf(low), CostOf(high), t);
    }
  }
  return scaled(points[points.size() - 1]);
}

StageProfile ProfileStage(const ModelProfile& profile, BlockRange blocks,
                          bool first, bool last, int micro_batch_size) {
  StageProfile stage;
  bool split = true;
  auto add = [&](const LayerProfile& layer) {
    const LayerCost cost = CostAt(layer, micro_batch_size);
    stage.forward_seconds += cost.forward_seconds;
    stage.backward_seconds += cost.backward_seconds;
    split = split && cost.backward_input_seconds >= 0;
    stage.backward_input_seconds += cost.backward_input_seconds;
    stage.backward_weight_seconds += cost.backward_weight_seconds;
    const int64_t activations =
        layer.activation_bytes_per_sample() * micro_batch_size;
    stage.activation_bytes += activations;
    stage.backward_extra_bytes =
        std::max(stage.backward_extra_bytes,
                 layer.backward_extra_bytes_per_sample() * micro_batch_size);
    stage.parameter_bytes += layer.parameter_bytes();
    stage.optimizer_seconds += layer.optimizer_seconds();
    stage.boundary_bytes = layer.output_bytes_per_sample() * micro_batch_size;
  };
  if (first) add(profile.layers(0));
  for (int b = blocks.first_block; b < blocks.first_block + blocks.num_blocks; ++b) {
    add(profile.layers(LayerIndexOfBlock(b)));
  }
  if (last) add(profile.layers(profile.layers_size() - 1));
  if (!split) {
    stage.backward_input_seconds = -1;
    stage.backward_weight_seconds = -1;
  }
  return stage;
}

int NumBlocks(const ModelProfile& profile) {
  return std::max(0, profile.layers_size() - 2);
}

}  // namespace chimera::planner
