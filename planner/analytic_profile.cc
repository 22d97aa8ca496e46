#include "planner/analytic_profile.h"

#include "common/version.h"
#include "planner/model_profile.h"

namespace chimera::planner {
namespace {

constexpr int kByteVocabulary = 256;
constexpr double kBackwardToForwardFlops = 2.0;

// A model's sizes, its defaults filled in: sequence, hidden, FFN, vocabulary,
// and the width of its keys and values (h, or fewer with grouped queries).
struct Dimensions {
  double s, h, f, v, kv;
};

bool IsLlama(const chimera::v1::ModelSpec& model) {
  return model.family() == "llama";
}

Dimensions DimensionsOf(const chimera::v1::ModelSpec& model) {
  const double h = model.hidden_size();
  const double kv_heads =
      model.num_kv_heads() > 0 ? model.num_kv_heads() : model.num_heads();
  return {static_cast<double>(model.seq_length()), h,
          model.ffn_size() > 0 ? model.ffn_size() : 4 * h,
          static_cast<double>(model.vocab_size() > 0 ? model.vocab_size()
                                                     : kByteVocabulary),
          h / model.num_heads() * kv_heads};
}

// The weights of a block's matrix products: each costs 2 FLOPs per weight
// and token forward.
double BlockMatrixParameters(const chimera::v1::ModelSpec& model) {
  const auto [s, h, f, v, kv] = DimensionsOf(model);
  if (IsLlama(model)) return h * (h + 2 * kv) + h * h + 3 * h * f;
  return 4 * h * h + 2 * h * f;
}

double BlockForward(const chimera::v1::ModelSpec& model) {
  const auto [s, h, f, v, kv] = DimensionsOf(model);
  return 2 * s * BlockMatrixParameters(model) + 4 * s * s * h;
}

// The head's projection onto the vocabulary, per sample.
double HeadForwardFlops(double s, double h, double v) { return 2 * s * h * v; }

int BytesPerElement(const std::string& dtype) {
  if (dtype == "float64") return 8;
  if (dtype == "bfloat16") return 2;
  return 4;
}

struct LayerShape {
  const char* kind;
  double parameters;
  double forward_flops_per_sample;
  double activation_bytes_per_sample;
  double output_bytes_per_sample;
};

void AddLayer(const LayerShape& shape, int bytes_per_element,
              const chimera::v1::DeviceSpec& device,
              const EfficiencyCurve& curve, double tokens_per_sample,
              chimera::v1::ModelProfile* profile) {
  chimera::v1::LayerProfile* layer = profile->add_layers();
  layer->set_kind(shape.kind);
  layer->set_parameter_bytes(static_cast<int64_t>(shape.parameters * bytes_per_element));
  layer->set_activation_bytes_per_sample(
      static_cast<int64_t>(shape.activation_bytes_per_sample));
  layer->set_output_bytes_per_sample(static_cast<int64_t>(shape.output_bytes_per_sample));
  for (int b = 1; b <= kMaxProfiledMicroBatch; b *= 2) {
    const double flop_rate = device.peak_flops() * curve.At(b * tokens_per_sample);
    const double forward = b * shape.forward_flops_per_sample / flop_rate;
    auto* timing = layer->add_timings();
    timing->set_micro_batch_size(b);
    timing->set_forward_seconds(forward);
    timing->set_backward_seconds(kBackwardToForwardFlops * forward);
  }
}

}  // namespace

double BlockForwardFlops(double seq_length, double hidden_size,
                         double ffn_size) {
  const double s = seq_length, h = hidden_size, f = ffn_size;
  return 2 * s * (4 * h * h + 2 * h * f) + 4 * s * s * h;
}

double ModelFlopsPerSample(const chimera::v1::ModelSpec& model) {
  const auto [s, h, f, v, kv] = DimensionsOf(model);
  const double forward =
      model.num_layers() * BlockForward(model) + HeadForwardFlops(s, h, v);
  return (1 + kBackwardToForwardFlops) * forward;
}

double UnsyncedEmbeddingBytes(const chimera::v1::ModelSpec& model,
                              double tokens_per_step) {
  // A tied embedding's gradient holds the head's part too, dense: it is
  // summed whole.
  if (model.tie_embeddings()) return 0;
  const double v = DimensionsOf(model).v;
  const int d = BytesPerElement(model.dtype());
  const double unused_rows = std::max(0.0, v - tokens_per_step);
  return unused_rows * model.hidden_size() * d - v * d;
}

chimera::v1::ModelProfile AnalyticProfile(const chimera::v1::ModelSpec& model,
                                          const chimera::v1::DeviceSpec& device,
                                          const EfficiencyCurve& curve) {
  const auto [s, h, f, v, kv] = DimensionsOf(model);
  const double a = model.num_heads();
  const int d = BytesPerElement(model.dtype());
  const bool llama = IsLlama(model);

  chimera::v1::ModelProfile profile;
  profile.set_api_version(kApiVersion);
  profile.set_kind(kModelProfileKind);
  profile.set_source("analytic");
  profile.set_device("modelled");

  const double hidden_bytes = s * h * d;
  const double embedding_parameters = llama ? v * h : (v + s) * h;
  AddLayer({"embedding", embedding_parameters, 2 * s * h, hidden_bytes,
            hidden_bytes},
           d, device, curve, s, &profile);
  // Llama's, counted from what autograd keeps of the worker's block: twelve
  // hidden-wide tensors per token (each unfused RMSNorm's input, its
  // normalised values before and after the gain; queries and keys rotated,
  // keys and values repeated to every head; the context...), four FFN-wide
  // ones (gate and up, silu(gate), their product) and the attention
  // probabilities.
  const double block_parameters =
      BlockMatrixParameters(model) + (llama ? 2 * h : 9 * h + f);
  const double block_activations =
      llama ? (12 * s * h + 4 * s * f + a * s * s) * d
            : (34 * s * h + 5 * a * s * s) * d / 2.0;
  const LayerShape block{"block", block_parameters, BlockForward(model),
                         block_activations, hidden_bytes};
  for (int i = 0; i < model.num_layers(); ++i) {
    AddLayer(block, d, device, curve, s, &profile);
  }
  // With tied embeddings the last stage holds a copy of the embedding's
  // weight, so the head lists it as well (a one-stage plan counts it twice);
  // a tied head has no bias.
  const double head_bias = llama || model.tie_embeddings() ? 0 : v;
  const double head_parameters = (llama ? h : 2 * h) + v * h + head_bias;
  AddLayer({"head", head_parameters, HeadForwardFlops(s, h, v),
            2 * s * v * d + hidden_bytes, static_cast<double>(d)},
           d, device, curve, s, &profile);
  return profile;
}

}  // namespace chimera::planner
