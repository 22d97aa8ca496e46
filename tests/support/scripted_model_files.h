// The test model of tests/support/scripted_model.py as TorchScript files,
// written by scripts/export-torchscript with Debian's python3-torch, and
// the sizes a job declares for it.
#ifndef CHIMERA_TESTS_SUPPORT_SCRIPTED_MODEL_FILES_H_
#define CHIMERA_TESTS_SUPPORT_SCRIPTED_MODEL_FILES_H_

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "common/directory.h"
#include "tests/support/debian_python.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "worker/model/model_config.h"

namespace chimera::testing {

inline constexpr char kScriptedModel[] =
    CHIMERA_SOURCE_DIR "/tests/support/scripted_model.py";

// The job's model for the test model (chimera_model(): three blocks of
// width 8, a vocabulary of 16), on 4 tokens, float32.
inline worker::ModelConfig ScriptedModelConfig() {
  worker::ModelConfig config;
  config.family = worker::ModelFamily::kTorchscript;
  config.num_layers = 3;
  config.hidden_size = 8;
  config.ffn_size = 32;
  config.num_heads = 2;
  config.vocab_size = 16;
  config.seq_length = 4;
  return config;
}

// scripts/export-torchscript of the test model's `function` into `out`.
inline ProcessResult ExportScriptedModel(
    const std::string& out, const std::string& function = "chimera_model") {
  return RunProcess({kDebianPython,
                     CHIMERA_SOURCE_DIR "/scripts/export-torchscript",
                     kScriptedModel, "--out", out, "--function", function});
}

// The test model's piece `piece_class`, scripted and saved as it is (the
// helper refuses some) to `path`.
inline ProcessResult SaveScriptedPiece(const std::string& piece_class,
                                       const std::string& path) {
  return RunProcess({kDebianPython, kScriptedModel, piece_class, path});
}

// A suite whose tests share the test model, exported once before its first
// test into root()/model.
class ScriptedModelSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    exported_ = new TempDir;
    const ProcessResult result =
        ExportScriptedModel(exported_->path() + "/model");
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  static void TearDownTestSuite() {
    delete exported_;
    exported_ = nullptr;
  }
  // The directory the model is in, opened as a task opens it (beneath its
  // root).
  static Directory ModelDirectory() {
    absl::StatusOr<Directory> root = Directory::OpenRoot(exported_->path());
    EXPECT_TRUE(root.ok()) << root.status();
    absl::StatusOr<Directory> model = root->Open("model", /*create=*/false);
    EXPECT_TRUE(model.ok()) << model.status();
    return *std::move(model);
  }

 private:
  static inline TempDir* exported_ = nullptr;
};

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_SCRIPTED_MODEL_FILES_H_
