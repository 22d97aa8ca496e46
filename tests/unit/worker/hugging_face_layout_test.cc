#include "worker/weights/hugging_face_layout.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "tests/support/debian_python.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/worker/test_models.h"
#include "worker/model/transformer_stage.h"
#include "worker/weights/safetensors_file.h"

namespace chimera::worker {
namespace {

using chimera::testing::kDebianPython;
using ::testing::HasSubstr;
using testing::TinyConfig;

std::shared_ptr<TransformerStage> WholeModel(const ModelConfig& config,
                                             uint64_t seed) {
  absl::StatusOr<std::shared_ptr<TransformerStage>> model =
      BuildTransformerStage(config, {0, config.num_layers}, seed);
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

NamedTensors Parameters(const Stage& stage) {
  NamedTensors named;
  for (const auto& item : stage.named_parameters()) {
    named.emplace_back(item.key(), item.value());
  }
  return named;
}

// The tiny Llama (hidden 16, 4 heads, 2 key/value heads of 4, FFN 40,
// vocabulary 29) as LlamaForCausalLM names and shapes its weights.
TEST(HuggingFaceLayoutTest, LlamaTensorsHaveLlamaForCausalLMsNamesAndShapes) {
  const ModelConfig config = TinyConfig(ModelFamily::kLlama);
  const absl::StatusOr<NamedTensors> tensors =
      ToHuggingFace(config, Parameters(*WholeModel(config, 1)));
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, tensor] : *tensors) {
    shapes[name] = tensor.sizes().vec();
  }
  EXPECT_EQ(shapes.size(), 2 + 4 * 9 + 1u);
  EXPECT_EQ(shapes.at("model.embed_tokens.weight"),
            (std::vector<int64_t>{29, 16}));
  EXPECT_EQ(shapes.at("model.layers.3.input_layernorm.weight"),
            (std::vector<int64_t>{16}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.q_proj.weight"),
            (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.k_proj.weight"),
            (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.v_proj.weight"),
            (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(shapes.at("model.layers.1.self_attn.o_proj.weight"),
            (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(shapes.at("model.layers.2.post_attention_layernorm.weight"),
            (std::vector<int64_t>{16}));
  EXPECT_EQ(shapes.at("model.layers.2.mlp.gate_proj.weight"),
            (std::vector<int64_t>{40, 16}));
  EXPECT_EQ(shapes.at("model.layers.2.mlp.up_proj.weight"),
            (std::vector<int64_t>{40, 16}));
  EXPECT_EQ(shapes.at("model.layers.2.mlp.down_proj.weight"),
            (std::vector<int64_t>{16, 40}));
  EXPECT_EQ(shapes.at("model.norm.weight"), (std::vector<int64_t>{16}));
  EXPECT_EQ(shapes.at("lm_head.weight"), (std::vector<int64_t>{29, 16}));
}

// Written as a safetensors file, read and copied into another model, the
// weights are the first model's, bit for bit; and so is what it computes.
TEST(HuggingFaceLayoutTest, LlamaWeightsRoundTripThroughASafetensorsFile) {
  const ModelConfig config = TinyConfig(ModelFamily::kLlama);
  const auto trained = WholeModel(config, 1);
  const auto fresh = WholeModel(config, 2);
  const chimera::testing::TempDir dir;
  const std::string path = dir.path() + "/model.safetensors";
  const absl::StatusOr<NamedTensors> tensors =
      ToHuggingFace(config, Parameters(*trained));
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_TRUE(WriteSafetensorsFile(path, *tensors, {{"format", "pt"}}).ok());
  const absl::StatusOr<std::map<std::string, at::Tensor>> read =
      ReadSafetensorsFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  const absl::Status copied =
      CopyFromHuggingFace(config, *read, Parameters(*fresh));
  ASSERT_TRUE(copied.ok()) << copied;
  for (const auto& [name, parameter] : Parameters(*trained)) {
    EXPECT_TRUE(at::equal(parameter, fresh->named_parameters()[name])) << name;
  }
  const at::Tensor ids = testing::RandomTokens(config, 2).slice(1, 0, 8);
  EXPECT_TRUE(at::equal(trained->Forward(ids), fresh->Forward(ids)));
}

ModelConfig TiedScaledLlama() {
  ModelConfig config = TinyConfig(ModelFamily::kLlama);
  config.rope_theta = 500000;
  config.tie_embeddings = true;
  // Of a head's two frequencies (wavelengths 6.3 and 4443), the first falls
  // between the bands (16 / 4, 16 / 1) and the second beyond them.
  config.rope_scaling = {.factor = 8,
                         .low_frequency_factor = 1,
                         .high_frequency_factor = 4,
                         .original_context = 16};
  return config;
}

ModelConfig TiedGpt() {
  ModelConfig config = TinyConfig(ModelFamily::kGpt);
  config.tie_embeddings = true;
  return config;
}

struct ReferenceCase {
  std::string name;
  ModelConfig config;
};

void PrintTo(const ReferenceCase& c, std::ostream* out) { *out << c.name; }

class HuggingFaceReferenceTest
    : public ::testing::TestWithParam<ReferenceCase> {};

// What LlamaForCausalLM or GPT2LMHeadModel computes with the exported
// weights, as an independent PyTorch rendering of their definitions
// computes it (tests/support/hugging_face_logits.py), is what our model
// computes: the layouts are Hugging Face's (Llama's rotary halves, grouped
// heads and gate/up order; GPT-2's transposed Conv1D matrices and q/k/v
// order), and so are tied embeddings and Llama 3.1's rope scaling.
TEST_P(HuggingFaceReferenceTest, ComputesWhatHuggingFacesModelComputes) {
  const ModelConfig& config = GetParam().config;
  const auto model = WholeModel(config, 5);
  const chimera::testing::TempDir dir;
  const absl::StatusOr<NamedTensors> tensors =
      ToHuggingFace(config, Parameters(*model));
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_TRUE(
      WriteSafetensorsFile(dir.path() + "/model.safetensors", *tensors, {})
          .ok());
  const absl::StatusOr<std::string> json = HuggingFaceConfig(config);
  ASSERT_TRUE(json.ok()) << json.status();
  dir.WriteFile("config.json", *json);
  const at::Tensor tokens = testing::RandomTokens(config, 3).slice(1, 0, 12);
  at::Tensor logits;
  {
    at::NoGradGuard no_grad;
    logits = model->Forward(tokens);
  }
  ASSERT_TRUE(WriteSafetensorsFile(dir.path() + "/check.safetensors",
                                   {{"tokens", tokens}, {"logits", logits}}, {})
                  .ok());
  const chimera::testing::ProcessResult python = chimera::testing::RunProcess(
      {kDebianPython,
       CHIMERA_SOURCE_DIR "/tests/support/hugging_face_logits.py", dir.path(),
       dir.path() + "/check.safetensors"});
  ASSERT_EQ(python.exit_code, 0) << python.err;
  EXPECT_LT(std::stod(python.out), 1e-12) << python.out;
  EXPECT_GT(logits.abs().max().item<double>(), 1e-3) << "a vacuous check";
}

ModelConfig PlainLlama() {
  ModelConfig config = TinyConfig(ModelFamily::kLlama);
  config.rope_theta = 500000;
  return config;
}

INSTANTIATE_TEST_SUITE_P(Layouts, HuggingFaceReferenceTest,
                         ::testing::Values(ReferenceCase{"Llama", PlainLlama()},
                                           ReferenceCase{
                                               "LlamaTiedAndRopeScaled",
                                               TiedScaledLlama()},
                                           ReferenceCase{"Gpt2", TiedGpt()}),
                         [](const auto& info) { return info.param.name; });

// The tiny tied GPT (hidden 16, FFN 40, vocabulary 29, 12 positions) as
// GPT2LMHeadModel names and shapes its weights: Conv1D matrices [in, out],
// no lm_head.
TEST(HuggingFaceLayoutTest, GptTensorsHaveGpt2LMHeadModelsNamesAndShapes) {
  const ModelConfig config = TiedGpt();
  const auto model = WholeModel(config, 1);
  const absl::StatusOr<NamedTensors> tensors =
      ToHuggingFace(config, Parameters(*model));
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  std::map<std::string, at::Tensor> by_name(tensors->begin(), tensors->end());
  EXPECT_EQ(by_name.size(), 2 + 4 * 12 + 2u);
  const auto shape = [&](const std::string& name) {
    return by_name.at(name).sizes().vec();
  };
  EXPECT_EQ(shape("transformer.wte.weight"), (std::vector<int64_t>{29, 16}));
  EXPECT_EQ(shape("transformer.wpe.weight"), (std::vector<int64_t>{12, 16}));
  EXPECT_EQ(shape("transformer.h.0.attn.c_attn.weight"),
            (std::vector<int64_t>{16, 48}));
  EXPECT_EQ(shape("transformer.h.0.attn.c_attn.bias"),
            (std::vector<int64_t>{48}));
  EXPECT_EQ(shape("transformer.h.1.attn.c_proj.weight"),
            (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(shape("transformer.h.2.mlp.c_fc.weight"),
            (std::vector<int64_t>{16, 40}));
  EXPECT_EQ(shape("transformer.h.2.mlp.c_proj.weight"),
            (std::vector<int64_t>{40, 16}));
  EXPECT_EQ(shape("transformer.h.3.ln_2.bias"), (std::vector<int64_t>{16}));
  EXPECT_EQ(shape("transformer.ln_f.weight"), (std::vector<int64_t>{16}));
  EXPECT_EQ(by_name.count("lm_head.weight"), 0u);
  EXPECT_TRUE(at::equal(by_name.at("transformer.h.0.attn.c_attn.weight"),
                        model->named_parameters()["layer0.qkv_weight"].t()));
  const absl::StatusOr<std::string> json = HuggingFaceConfig(config);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"model_type\": \"gpt2\""));
  EXPECT_THAT(*json, HasSubstr("\"activation_function\": \"gelu\""));

  // And back into another model, bit for bit.
  const auto fresh = WholeModel(config, 2);
  ASSERT_TRUE(CopyFromHuggingFace(config, by_name, Parameters(*fresh)).ok());
  for (const auto& [name, parameter] : Parameters(*model)) {
    EXPECT_TRUE(at::equal(parameter, fresh->named_parameters()[name])) << name;
  }
}

// A tied model's weights have no lm_head.weight; its config says so.
TEST(HuggingFaceLayoutTest, TiedWeightsHaveNoHeadOfTheirOwn) {
  const ModelConfig tied = TiedScaledLlama();
  const absl::StatusOr<NamedTensors> tensors =
      ToHuggingFace(tied, Parameters(*WholeModel(tied, 1)));
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  std::map<std::string, at::Tensor> by_name(tensors->begin(), tensors->end());
  EXPECT_EQ(by_name.count("lm_head.weight"), 0u);
  EXPECT_EQ(by_name.count("model.embed_tokens.weight"), 1u);
  const absl::StatusOr<std::string> json = HuggingFaceConfig(tied);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"tie_word_embeddings\": true"));
  EXPECT_THAT(*json, HasSubstr("\"rope_type\": \"llama3\""));
  // Into an untied model they do not fit, and the error says why.
  const ModelConfig untied = TinyConfig(ModelFamily::kLlama);
  EXPECT_THAT(
      CopyFromHuggingFace(untied, by_name, Parameters(*WholeModel(untied, 2)))
          .message(),
      HasSubstr("no tensor 'lm_head.weight' (weights whose head is their "
                "embedding's need spec.model.tieEmbeddings: true)"));
}

TEST(HuggingFaceLayoutTest, MissingOrMisshapenTensorsAreNamed) {
  const ModelConfig config = TinyConfig(ModelFamily::kLlama);
  const absl::StatusOr<NamedTensors> tensors =
      ToHuggingFace(config, Parameters(*WholeModel(config, 1)));
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  std::map<std::string, at::Tensor> by_name(tensors->begin(), tensors->end());
  by_name["model.layers.1.self_attn.k_proj.weight"] =
      at::zeros({16, 16}, at::kDouble);
  const auto model = WholeModel(config, 2);
  EXPECT_THAT(
      CopyFromHuggingFace(config, by_name, Parameters(*model)).message(),
      HasSubstr("tensor 'model.layers.1.self_attn.k_proj.weight' is "
                "[16, 16]; the model's is [8, 16]"));
  by_name.erase("model.layers.1.self_attn.k_proj.weight");
  EXPECT_THAT(
      CopyFromHuggingFace(config, by_name, Parameters(*model)).message(),
      HasSubstr("no tensor 'model.layers.1.self_attn.k_proj.weight'"));
}

// GPT-2's head is its token embedding, with no bias: an untied GPT's head
// has no place in that layout, and BERT has none here.
TEST(HuggingFaceLayoutTest, BertAndUntiedGptHaveNoLayout) {
  const absl::Status untied =
      HuggingFacePieces(TinyConfig(ModelFamily::kGpt), "head.output_weight")
          .status();
  EXPECT_EQ(untied.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(untied.message(), HasSubstr("spec.model.tieEmbeddings: true"));
  EXPECT_EQ(HuggingFaceConfig(TinyConfig(ModelFamily::kBert)).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(
      HuggingFacePieces(TinyConfig(ModelFamily::kLlama), "layer9.qkv_weight")
          .status()
          .code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(
      HuggingFacePieces(TiedGpt(), "layer0.gate_up_weight").status().code(),
      absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace chimera::worker
