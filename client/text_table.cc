#include "client/text_table.h"

#include <algorithm>
#include <utility>

namespace chimera::client {

TextTable::TextTable(std::vector<Column> columns)
    : columns_(std::move(columns)) {}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::ToString() const {
  std::vector<size_t> widths;
  for (const Column& column : columns_) widths.push_back(column.header.size());
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  const auto append_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string padding(widths[i] - cells[i].size(), ' ');
      if (i > 0) line += "  ";
      line += columns_[i].alignment == kRight ? padding + cells[i]
                                              : cells[i] + padding;
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  };
  std::vector<std::string> headers;
  for (const Column& column : columns_) headers.push_back(column.header);
  append_line(headers);
  for (const auto& row : rows_) append_line(row);
  return out;
}

}  // namespace chimera::client
