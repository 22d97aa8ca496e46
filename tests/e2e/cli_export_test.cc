// chimera export as a user runs it: a trained llama (or tied gpt) job's
// checkpoint written as the files Hugging Face's LlamaForCausalLM (or
// GPT2LMHeadModel) loads, and a torchscript job's as its own pieces load it.
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/debian_python.h"
#include "tests/support/scripted_model_files.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::testing::HasSubstr;

// kLlamaJob's spec.model, which other models replace: 4 blocks of hidden 32
// (4 heads of 8, 2 key/value heads).
constexpr char kLlamaModel[] =
    "{family: llama, numLayers: 4, hiddenSize: 32, numHeads: 4, numKvHeads: 2, "
    "ffnSize: 64, vocabSize: 300, seqLength: 16}";
// 1F1B over two workers, a checkpoint every 2 of 4 steps.
constexpr char kLlamaJob[] = R"(apiVersion: chimera.dev/v1alpha1
kind: TrainJob
metadata: {name: llama-export}
spec:
  model: {family: llama, numLayers: 4, hiddenSize: 32, numHeads: 4, numKvHeads: 2, ffnSize: 64, vocabSize: 300, seqLength: 16}
  data: {format: synthetic}
  training:
    globalBatchSize: 4
    microBatchSize: 2
    maxSteps: 4
    seed: 1
    checkpointDir: ckpt
    checkpointEvery: 2
    optimizer: {name: adamw, lr: 1.0e-3}
  parallelism: {schedule: 1f1b, pipeline: 2, data: 1, microBatches: 2}
  resources: {workers: 2, device: cpu}
)";

ProcessResult Chimera(std::vector<std::string> args, const std::string& dir) {
  args.insert(args.begin(), CHIMERA_BINARY);
  return RunProcess(args, dir, absl::Minutes(3));
}

// The id `chimera run` printed in "job <id> SUCCEEDED" for the job `name`.
std::string JobId(const std::string& out,
                  const std::string& name = "llama-export") {
  const size_t at = out.find("\njob " + name + "-");
  if (at == std::string::npos) return "";
  const size_t begin = at + 5;
  return out.substr(begin, out.find(' ', begin) - begin);
}

TEST(CliExportTest, WritesALlamaCheckpointAsHuggingFaceFiles) {
  chimera::testing::TempDir dir;
  const std::string job = dir.WriteFile("job.yaml", kLlamaJob);
  const ProcessResult run =
      Chimera({"run", "-f", job, "--no-profile"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string id = JobId(run.out);
  ASSERT_FALSE(id.empty()) << run.out;

  const ProcessResult exported = Chimera(
      {"export", "--job", job, "--checkpoint", "ckpt/" + id, "--out", "hf"},
      dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_THAT(exported.out,
              HasSubstr("exported step 4 of ckpt/" + id + ": 39 tensors"));

  // The header as Python's json reads it: every tensor, the step it holds.
  const ProcessResult python = RunProcess(
      {testing::FindOnPath("python3"), "-c",
       "import json, struct, sys\n"
       "f = open(sys.argv[1], 'rb')\n"
       "h = json.loads(f.read(struct.unpack('<Q', f.read(8))[0]))\n"
       "print(len(h) - 1, h['__metadata__']['chimera.step'],\n"
       "      h['model.layers.3.self_attn.k_proj.weight']['shape'],\n"
       "      h['lm_head.weight']['dtype'])\n",
       dir.path() + "/hf/model.safetensors"});
  ASSERT_EQ(python.exit_code, 0) << python.err;
  EXPECT_EQ(python.out, "39 4 [16, 32] F32\n");

  std::ifstream config_file(dir.path() + "/hf/config.json");
  const nlohmann::json config = nlohmann::json::parse(config_file);
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(config["num_hidden_layers"], 4);
  EXPECT_EQ(config["num_key_value_heads"], 2);
  EXPECT_EQ(config["intermediate_size"], 64);
  EXPECT_EQ(config["vocab_size"], 300);

  // An earlier step, asked for by number.
  const ProcessResult earlier =
      Chimera({"export", "--job", job, "--checkpoint", "ckpt/" + id, "--out",
               "hf-2", "--step", "2"},
              dir.path());
  EXPECT_EQ(earlier.exit_code, 0) << earlier.err;
  EXPECT_THAT(earlier.out, HasSubstr("exported step 2 of"));
}

// What `chimera run -o json` reported: each step's loss, by step (from
// 0), and the id of the job.
struct JsonRun {
  std::map<int, double> losses;
  std::string id;
};

JsonRun ReadJsonRun(const std::string& out) {
  JsonRun run;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    const nlohmann::json json =
        nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!json.is_object()) continue;
    if (json.contains("step") && json["step"].contains("loss")) {
      run.losses[json["step"]["step"].get<int>()] =
          json["step"]["loss"].get<double>();
    }
    if (json.contains("job") && json["job"].contains("id")) {
      run.id = json["job"]["id"].get<std::string>();
    }
  }
  return run;
}

struct RoundTripCase {
  std::string name;
  std::string model;  // spec.model, as a YAML flow mapping
  int tensors;        // what the export writes
  bool rope_scaling;
};

class CliExportRoundTripTest : public ::testing::TestWithParam<RoundTripCase> {
};

// The round trip: a job started from the weights exported after step 2
// computes, in its first step, the very loss the exporting job computed in
// its third, from the same weights. The corpus is one sample long, so that
// every step of both jobs reads the same batch. Tied: the head is the
// embedding (whose copies on the two workers must stay equal for this to
// hold); the tied Llama's rotary frequencies are scaled too; GPT-2's
// layout transposes the blocks' matrices.
TEST_P(CliExportRoundTripTest,
       AJobStartedFromExportedWeightsComputesTheCheckpointsLoss) {
  const RoundTripCase& test = GetParam();
  const bool tied = absl::StrContains(test.model, "tieEmbeddings: true");
  chimera::testing::TempDir dir;
  dir.WriteFile("one-sample.txt", "seventeen bytes!\n");
  const std::string text_job = absl::StrReplaceAll(
      kLlamaJob, {{"format: synthetic", "format: text, path: one-sample.txt"},
                  {"maxSteps: 4", "maxSteps: 3"},
                  {"checkpointEvery: 2", "checkpointEvery: 1"},
                  {kLlamaModel, test.model}});
  const std::string job = dir.WriteFile("job.yaml", text_job);
  const ProcessResult run =
      Chimera({"run", "-f", job, "--no-profile", "-o", "json"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const JsonRun trained = ReadJsonRun(run.out);
  ASSERT_EQ(trained.losses.size(), 3u) << run.out;
  ASSERT_FALSE(trained.id.empty()) << run.out;
  const ProcessResult exported =
      Chimera({"export", "--job", job, "--checkpoint", "ckpt/" + trained.id,
               "--out", "hf", "--step", "2"},
              dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  std::ifstream config_file(dir.path() + "/hf/config.json");
  const nlohmann::json config = nlohmann::json::parse(config_file);
  EXPECT_EQ(config["tie_word_embeddings"], tied);
  EXPECT_EQ(config.contains("rope_scaling"), test.rope_scaling);
  EXPECT_THAT(exported.out,
              HasSubstr(absl::StrCat(": ", test.tensors, " tensors")));

  const std::string with_weights = absl::StrCat(
      test.model.substr(0, test.model.size() - 1), ", initFrom: hf}");
  const std::string fine_tune = dir.WriteFile(
      "fine-tune.yaml",
      absl::StrReplaceAll(text_job, {{test.model, with_weights},
                                     {"maxSteps: 3", "maxSteps: 1"},
                                     {"    checkpointDir: ckpt\n", ""},
                                     {"    checkpointEvery: 1\n", ""}}));
  const ProcessResult started = Chimera(
      {"run", "-f", fine_tune, "--no-profile", "-o", "json"}, dir.path());
  ASSERT_EQ(started.exit_code, 0) << started.out << started.err;
  const JsonRun fine_tuned = ReadJsonRun(started.out);
  ASSERT_EQ(fine_tuned.losses.size(), 1u) << started.out;
  EXPECT_EQ(fine_tuned.losses.at(0), trained.losses.at(2)) << "bit for bit";
  EXPECT_NE(fine_tuned.losses.at(0), trained.losses.at(0))
      << "the weights made a difference";
}

INSTANTIATE_TEST_SUITE_P(
    Models, CliExportRoundTripTest,
    ::testing::Values(
        // 39 tensors: the embedding, 9 per block, the norm and the head.
        RoundTripCase{"Llama", kLlamaModel, 39, false},
        RoundTripCase{"LlamaTied",
                      "{family: llama, numLayers: 4, hiddenSize: 32, "
                      "numHeads: 4, numKvHeads: 2, ffnSize: 64, vocabSize: "
                      "300, seqLength: 16, tieEmbeddings: true, ropeScaling: "
                      "{factor: 8, originalMaxPositionEmbeddings: 16}}",
                      38, true},
        // Tokens and positions, 12 per block, the final norm's two.
        RoundTripCase{"Gpt2",
                      "{family: gpt, numLayers: 4, hiddenSize: 32, numHeads: "
                      "4, ffnSize: 64, vocabSize: 300, seqLength: 16, "
                      "tieEmbeddings: true}",
                      52, false}),
    [](const auto& info) { return info.param.name; });

// A torchscript job's checkpoint, exported, loads into the user's own
// pieces: torch.nn.ModuleDict(tests/support/scripted_model.py's
// chimera_model()) takes every tensor by its name, strictly, and they are
// the trained weights, not the starting ones.
TEST(CliExportTest, WritesATorchScriptCheckpointUnderThePiecesNames) {
  chimera::testing::TempDir dir;
  const ProcessResult scripted =
      chimera::testing::ExportScriptedModel(dir.path() + "/model");
  ASSERT_EQ(scripted.exit_code, 0) << scripted.err;
  const std::string job = dir.WriteFile(
      "job.yaml",
      absl::StrReplaceAll(
          kLlamaJob,
          {{kLlamaModel,
            "{family: torchscript, modules: model, numLayers: 3, hiddenSize: "
            "8, numHeads: 2, vocabSize: 16, seqLength: 4}"},
           {"llama-export", "torchscript-export"}}));
  const ProcessResult run =
      Chimera({"run", "-f", job, "--no-profile"}, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string id = JobId(run.out, "torchscript-export");
  ASSERT_FALSE(id.empty()) << run.out;

  const ProcessResult exported = Chimera(
      {"export", "--job", job, "--checkpoint", "ckpt/" + id, "--out", "out"},
      dir.path());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  // The embedding's weight, 4 per block, the head's two; no config.json.
  EXPECT_THAT(exported.out,
              HasSubstr("exported step 4 of ckpt/" + id + ": 15 tensors"));
  EXPECT_THAT(exported.out, HasSubstr("/model.safetensors\n"));

  const ProcessResult python = RunProcess(
      {chimera::testing::kDebianPython, "-c",
       "import json, struct, sys, torch\n"
       "sys.path.insert(0, sys.argv[2])\n"
       "import scripted_model\n"
       "f = open(sys.argv[1], 'rb')\n"
       "header = json.loads(f.read(struct.unpack('<Q', f.read(8))[0]))\n"
       "data = f.read()\n"
       "state = {}\n"
       "for name, t in header.items():\n"
       "    if name == '__metadata__': continue\n"
       "    begin, end = t['data_offsets']\n"
       "    state[name] = torch.frombuffer(bytearray(data[begin:end]),\n"
       "        dtype=torch.float32).reshape(t['shape'])\n"
       "pieces = scripted_model.chimera_model()\n"
       "pieces['blocks'] = torch.nn.ModuleList(pieces['blocks'])\n"
       "model = torch.nn.ModuleDict(pieces)\n"
       "start = model.head.out.weight.detach().clone()\n"
       "model.load_state_dict(state, strict=True)\n"
       "print(len(state), bool((model.head.out.weight != start).any()))\n",
       dir.path() + "/out/model.safetensors",
       CHIMERA_SOURCE_DIR "/tests/support"});
  ASSERT_EQ(python.exit_code, 0) << python.err;
  EXPECT_EQ(python.out, "15 True\n");
}

TEST(CliExportTest, WhatCannotBeExportedIsBadInputNamingWhy) {
  chimera::testing::TempDir dir;
  const std::string job = dir.WriteFile("job.yaml", kLlamaJob);
  const ProcessResult missing = Chimera(
      {"export", "--job", job, "--checkpoint", "ckpt/nothing", "--out", "hf"},
      dir.path());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--checkpoint ckpt/nothing: "));
  const ProcessResult gpt =
      Chimera({"export", "--job", CHIMERA_SOURCE_DIR "/examples/chimera.yaml",
               "--checkpoint", "ckpt/nothing", "--out", "hf"},
              dir.path());
  EXPECT_EQ(gpt.exit_code, 2);
  EXPECT_THAT(gpt.err,
              HasSubstr("a gpt model has Hugging Face's layout (GPT-2's) "
                        "only with tied embeddings"));
  const ProcessResult format =
      Chimera({"export", "--job", job, "--checkpoint", "ckpt/nothing", "--out",
               "hf", "--format", "gguf"},
              dir.path());
  EXPECT_EQ(format.exit_code, 2);
  EXPECT_THAT(format.err,
              HasSubstr("--format gguf: the one format is safetensors"));
}

}  // namespace
}  // namespace chimera
