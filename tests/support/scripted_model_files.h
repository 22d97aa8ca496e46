// The test model of tests/support/scripted_model.py as TorchScript files,
// written by scripts/export-torchscript with Debian's python3-torch.
#ifndef CHIMERA_TESTS_SUPPORT_SCRIPTED_MODEL_FILES_H_
#define CHIMERA_TESTS_SUPPORT_SCRIPTED_MODEL_FILES_H_

#include <string>

#include "tests/support/debian_python.h"
#include "tests/support/subprocess.h"

namespace chimera::testing {

inline constexpr char kScriptedModel[] =
    CHIMERA_SOURCE_DIR "/tests/support/scripted_model.py";

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

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_SCRIPTED_MODEL_FILES_H_
