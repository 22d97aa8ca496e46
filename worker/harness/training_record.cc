#include "worker/harness/training_record.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace chimera::worker::harness {
namespace {

// Layout: u64 step count, the losses; u64 parameter count; per parameter:
// u64 name length, the name, u64 value count, the values. Doubles and
// integers in the host's byte order (writer and reader are one machine).
void WriteCount(std::ofstream& out, uint64_t value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof(value));
}

void WriteDoubles(std::ofstream& out, const double* values, uint64_t count) {
  WriteCount(out, count);
  out.write(reinterpret_cast<const char*>(values), count * sizeof(double));
}

bool ReadCount(std::ifstream& in, uint64_t* value) {
  return static_cast<bool>(
      in.read(reinterpret_cast<char*>(value), sizeof(*value)));
}

bool ReadDoubles(std::ifstream& in, std::vector<double>* values) {
  uint64_t count = 0;
  if (!ReadCount(in, &count)) return false;
  values->resize(count);
  return static_cast<bool>(
      in.read(reinterpret_cast<char*>(values->data()), count * sizeof(double)));
}

}  // namespace

absl::Status WriteTrainingRecord(
    const std::string& path,
    const std::vector<std::pair<std::string, at::Tensor>>& parameters,
    const std::vector<double>& losses) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  WriteDoubles(out, losses.data(), losses.size());
  WriteCount(out, parameters.size());
  for (const auto& [name, tensor] : parameters) {
    WriteCount(out, name.size());
    out.write(name.data(), name.size());
    const at::Tensor values = tensor.detach().to(at::kDouble).contiguous();
    WriteDoubles(out, values.data_ptr<double>(), values.numel());
  }
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<TrainingRecord> ReadTrainingRecord(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  TrainingRecord record;
  uint64_t count = 0;
  bool ok = ReadDoubles(in, &record.losses) && ReadCount(in, &count);
  for (uint64_t i = 0; ok && i < count; ++i) {
    uint64_t length = 0;
    ok = ReadCount(in, &length);
    std::string name(ok ? length : 0, '\0');
    ok = ok && in.read(name.data(), length) &&
         ReadDoubles(in, &record.parameters[name]);
  }
  if (!ok) return absl::DataLossError(absl::StrCat(path, " is truncated"));
  return record;
}

}  // namespace chimera::worker::harness
