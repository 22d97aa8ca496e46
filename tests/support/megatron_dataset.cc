#include "tests/support/megatron_dataset.h"

#include <fstream>
#include <stdexcept>

namespace chimera::testing {
namespace {

int WidthOf(uint8_t dtype_code) {
  switch (dtype_code) {
    case 1:
    case 2:
      return 1;
    case 3:
    case 8:
      return 2;
    case 4:
      return 4;
    case 5:
      return 8;
  }
  throw std::invalid_argument("not an integer dtype code");
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

void AppendLittleEndian(std::string& out, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) {
    out.push_back(static_cast<char>(value >> (8 * i) & 0xff));
  }
}

std::string MegatronDataset::IndexBytes() const {
  std::string index("MMIDIDX\0\0", 9);
  AppendLittleEndian(index, 1, 8);
  AppendLittleEndian(index, dtype_code, 1);
  AppendLittleEndian(index, documents.size(), 8);
  AppendLittleEndian(index, documents.size() + 1, 8);
  for (const std::vector<int64_t>& document : documents) {
    AppendLittleEndian(index, document.size(), 4);
  }
  uint64_t offset = 0;
  for (const std::vector<int64_t>& document : documents) {
    AppendLittleEndian(index, offset, 8);
    offset += document.size() * WidthOf(dtype_code);
  }
  for (size_t d = 0; d <= documents.size(); ++d) {
    AppendLittleEndian(index, d, 8);
  }
  return index;
}

std::string MegatronDataset::DataBytes() const {
  std::string data;
  for (const std::vector<int64_t>& document : documents) {
    for (const int64_t id : document) {
      AppendLittleEndian(data, static_cast<uint64_t>(id), WidthOf(dtype_code));
    }
  }
  return data;
}

void MegatronDataset::Write(const std::string& prefix) const {
  WriteBytes(prefix + ".idx", IndexBytes());
  WriteBytes(prefix + ".bin", DataBytes());
}

}  // namespace chimera::testing
