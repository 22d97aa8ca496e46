#include "planner/analytic_profile.h"

#include "gtest/gtest.h"
#include "planner/model_profile.h"
#include "tests/unit/planner/test_jobs.h"

namespace chimera::planner {
namespace {

chimera::v1::ModelSpec SmallGpt() {
  chimera::v1::ModelSpec model;
  model.set_family("gpt");
  model.set_num_layers(3);
  model.set_hidden_size(64);
  model.set_ffn_size(256);
  model.set_num_heads(4);
  model.set_seq_length(32);
  model.set_vocab_size(1000);
  return model;
}

chimera::v1::DeviceSpec Device() {
  chimera::v1::DeviceSpec device;
  device.set_memory_bytes(1 << 30);
  device.set_peak_flops(1e12);
  return device;
}

// scripts/gpu-check's whole-job MFU job: 24 blocks of hidden 1024 (FFN 4h by
// default), sequence 1024, GPT-2's vocabulary; 2.48 TFLOPs a sample, about
// 6 x 354M parameters x 1024 tokens plus attention.
TEST(AnalyticProfileTest, ModelFlopsOfASampleAreThreeForwards) {
  chimera::v1::ModelSpec gpt;
  gpt.set_family("gpt");
  gpt.set_num_layers(24);
  gpt.set_hidden_size(1024);
  gpt.set_num_heads(16);
  gpt.set_seq_length(1024);
  gpt.set_vocab_size(50257);
  EXPECT_DOUBLE_EQ(ModelFlopsPerSample(gpt), 2480853221376.0);
}

// Its Llama job: llama3.2-1b at sequence 1024 (grouped queries: keys and
// values 512 wide; SwiGLU's three matrices), the sizes scripts/gpu-check's
// FLOP count takes; 8.0 TFLOPs a sample.
TEST(AnalyticProfileTest, ModelFlopsOfALlamaSampleCountItsOwnMatrices) {
  chimera::v1::ModelSpec llama;
  llama.set_family("llama");
  llama.set_num_layers(16);
  llama.set_hidden_size(2048);
  llama.set_ffn_size(8192);
  llama.set_num_heads(32);
  llama.set_num_kv_heads(8);
  llama.set_seq_length(1024);
  llama.set_vocab_size(128256);
  llama.set_tie_embeddings(true);
  EXPECT_DOUBLE_EQ(ModelFlopsPerSample(llama), 8004745297920.0);
}

TEST(AnalyticProfileTest, LayersAreEmbeddingBlocksHead) {
  chimera::v1::ModelProfile profile = AnalyticProfile(SmallGpt(), Device());
  EXPECT_TRUE(ValidateProfile(profile, 3).empty()) << ValidateProfile(profile, 3).ToStatus();
  ASSERT_EQ(profile.layers_size(), 5);
  EXPECT_EQ(profile.layers(0).kind(), "embedding");
  EXPECT_EQ(profile.layers(4).kind(), "head");
}

TEST(AnalyticProfileTest, ParameterBytesFollowTheLayerShapes) {
  chimera::v1::ModelProfile profile = AnalyticProfile(SmallGpt(), Device());
  const int64_t h = 64, f = 256, s = 32, v = 1000, d = 4;
  EXPECT_EQ(profile.layers(0).parameter_bytes(), (v + s) * h * d);
  EXPECT_EQ(profile.layers(1).parameter_bytes(), (4 * h * h + 2 * h * f + 9 * h + f) * d);
  EXPECT_EQ(profile.layers(4).parameter_bytes(), (2 * h + v * h + v) * d);
}

TEST(AnalyticProfileTest, BlockForwardTimeIsFlopsOverEfficientPeak) {
  EfficiencyCurve curve;
  chimera::v1::ModelProfile profile = AnalyticProfile(SmallGpt(), Device(), curve);
  const double h = 64, f = 256, s = 32;
  const double flops = 2 * s * (4 * h * h + 2 * h * f) + 4 * s * s * h;
  const LayerCost cost = CostAt(profile.layers(1), 4);
  EXPECT_NEAR(cost.forward_seconds, 4 * flops / (1e12 * curve.At(4 * s)), 1e-15);
  EXPECT_NEAR(cost.backward_seconds, 2 * cost.forward_seconds, 1e-15);
}

TEST(AnalyticProfileTest, LargerMicroBatchesAreMoreEfficientPerSample) {
  chimera::v1::ModelProfile profile = AnalyticProfile(SmallGpt(), Device());
  double previous = 1e9;
  for (int b = 1; b <= 256; b *= 2) {
    const double per_sample = CostAt(profile.layers(1), b).forward_seconds / b;
    EXPECT_LT(per_sample, previous) << "B = " << b;
    previous = per_sample;
  }
}

// A vocabulary of 1,000 rows of 64 float32s; the mask costs 4 bytes a row.
TEST(AnalyticProfileTest, EmbeddingRowsNoTokenCanUseAreNotSynced) {
  EXPECT_DOUBLE_EQ(UnsyncedEmbeddingBytes(SmallGpt(), 100),
                   900.0 * 64 * 4 - 1000 * 4);
  // Tokens enough to use every row: only the mask is extra.
  EXPECT_DOUBLE_EQ(UnsyncedEmbeddingBytes(SmallGpt(), 5000), -1000.0 * 4);
}

chimera::v1::ModelSpec Llama(int layers, int hidden, int ffn, int heads,
                             int kv_heads) {
  chimera::v1::ModelSpec model;
  model.set_family("llama");
  model.set_num_layers(layers);
  model.set_hidden_size(hidden);
  model.set_ffn_size(ffn);
  model.set_num_heads(heads);
  model.set_num_kv_heads(kv_heads);
  model.set_vocab_size(128256);
  model.set_seq_length(8192);
  model.set_dtype("bfloat16");
  return model;
}

int64_t Parameters(const chimera::v1::ModelProfile& profile) {
  int64_t bytes = 0;
  for (const auto& layer : profile.layers()) bytes += layer.parameter_bytes();
  return bytes / 2;  // bfloat16
}

// The published parameter counts of Meta-Llama-3-8B and -70B (their
// safetensors' totals): grouped-query keys and values, three FFN matrices,
// no biases, untied embeddings.
TEST(AnalyticProfileTest, LlamaParametersAreThePublishedCounts) {
  EXPECT_EQ(
      Parameters(AnalyticProfile(Llama(32, 4096, 14336, 32, 8), Device())),
      8030261248);
  EXPECT_EQ(
      Parameters(AnalyticProfile(Llama(80, 8192, 28672, 64, 8), Device())),
      70553706496);
}

// Llama 3.2 1B and 3B (published: 1,235,814,400 and 3,212,749,824) tie their
// embeddings: the head lists the copy of the embedding's weight the last
// stage holds, so the model's count is the layers' less one v·h.
TEST(AnalyticProfileTest, TiedLlamaParametersAreThePublishedCounts) {
  for (const auto& [model, published] :
       {std::pair{Llama(16, 2048, 8192, 32, 8), int64_t{1235814400}},
        {Llama(28, 3072, 8192, 24, 8), int64_t{3212749824}}}) {
    chimera::v1::ModelSpec tied = model;
    tied.set_tie_embeddings(true);
    const chimera::v1::ModelProfile profile = AnalyticProfile(tied, Device());
    EXPECT_EQ(Parameters(profile) - 128256 * tied.hidden_size(), published);
    EXPECT_EQ(profile.layers(profile.layers_size() - 1).parameter_bytes(),
              2 * (tied.hidden_size() + 128256 * tied.hidden_size()));
    EXPECT_EQ(UnsyncedEmbeddingBytes(tied, 100), 0);
  }
}

// GPT-2 (published: 124,439,808) ties its embeddings and its head has no
// bias; the head lists the last stage's copy of the embedding's weight.
TEST(AnalyticProfileTest, Gpt2ParametersAreThePublishedCount) {
  chimera::v1::ModelSpec gpt2;
  gpt2.set_family("gpt");
  gpt2.set_num_layers(12);
  gpt2.set_hidden_size(768);
  gpt2.set_ffn_size(3072);
  gpt2.set_num_heads(12);
  gpt2.set_vocab_size(50257);
  gpt2.set_seq_length(1024);
  gpt2.set_tie_embeddings(true);
  gpt2.set_dtype("bfloat16");
  EXPECT_EQ(Parameters(AnalyticProfile(gpt2, Device())) - 50257 * 768,
            124439808);
}

// Each block's matrices cost 2 FLOPs per weight and token forward; keys and
// values are an eighth of the queries' width in Llama 3 8B.
TEST(AnalyticProfileTest, LlamaFlopsCountItsGroupedAttentionAndSwiGlu) {
  const chimera::v1::ModelSpec model = Llama(32, 4096, 14336, 32, 8);
  const double s = 8192, h = 4096, f = 14336, k = 1024, v = 128256;
  const double block =
      2 * s * (2 * h * h + 2 * h * k + 3 * h * f) + 4 * s * s * h;
  EXPECT_DOUBLE_EQ(ModelFlopsPerSample(model),
                   3 * (32 * block + 2 * s * h * v));
  const chimera::v1::ModelProfile profile = AnalyticProfile(model, Device());
  EXPECT_EQ(profile.layers(1).activation_bytes_per_sample(),
            static_cast<int64_t>((12 * s * h + 4 * s * f + 32 * s * s) * 2));
}

TEST(AnalyticProfileTest, DoublePrecisionDoublesBytes) {
  chimera::v1::ModelSpec model = SmallGpt();
  const auto single = AnalyticProfile(model, Device());
  model.set_dtype("float64");
  const auto twice = AnalyticProfile(model, Device());
  EXPECT_EQ(twice.layers(1).parameter_bytes(), 2 * single.layers(1).parameter_bytes());
  EXPECT_EQ(twice.layers(1).activation_bytes_per_sample(),
            2 * single.layers(1).activation_bytes_per_sample());
}

}  // namespace
}  // namespace chimera::planner
