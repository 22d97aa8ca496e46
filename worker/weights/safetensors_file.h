// Tensors to and from safetensors files (common/safetensors.h), the format
// Hugging Face's models ship in.
//
//   RETURN_IF_ERROR(WriteSafetensorsFile("out/model.safetensors", tensors,
//                                        {{"format", "pt"}}));
//   ASSIGN_OR_RETURN(auto loaded,
//   ReadSafetensorsFile("out/model.safetensors"));
#ifndef CHIMERA_WORKER_WEIGHTS_SAFETENSORS_FILE_H_
#define CHIMERA_WORKER_WEIGHTS_SAFETENSORS_FILE_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/weights/hugging_face_layout.h"

namespace chimera::worker {

// Writes `tensors` (on any device, contiguous or not: each is copied to the
// host as it is written) in the order given, with `metadata`, to `path`:
// streamed to PATH.partial, synced and renamed, so that `path` exists only
// whole. INVALID_ARGUMENT for a dtype the format has no name for or a name
// given twice; INTERNAL naming the file when it cannot be written.
absl::Status WriteSafetensorsFile(
    const std::string& path, const NamedTensors& tensors,
    const std::map<std::string, std::string>& metadata);

// Every tensor of the safetensors file at `path`, on the CPU, by name.
// INVALID_ARGUMENT naming the file when its header is not valid
// (ParseSafetensorsHeader) or a tensor's dtype has no LibTorch type (the
// 8-bit floats, unsigned integers wider than 8 bits); NOT_FOUND and the
// like naming the file when it cannot be read.
absl::StatusOr<std::map<std::string, at::Tensor>> ReadSafetensorsFile(
    const std::string& path);

// The same for the file open for reading as `fd`, which errors call `name`:
// for a file opened beneath a root (common/directory.h).
absl::StatusOr<std::map<std::string, at::Tensor>> ReadSafetensorsFile(
    int fd, const std::string& name);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_WEIGHTS_SAFETENSORS_FILE_H_
