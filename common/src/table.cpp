// Aligned-text and CSV rendering of a Table.
#include "common/table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "common/errors.hpp"

namespace dtsim {

TextFormat parse_text_format(const std::string& value, const std::string& flag) {
  if (value == "table") return TextFormat::TABLE;
  if (value == "csv") return TextFormat::CSV;
  if (value == "json") return TextFormat::JSON;
  throw InputError(fmt::format("{}: expected table, csv or json, got '{}'", flag, value));
}

Table::Table(std::vector<std::string> header) : header_(std::move(header)) {}

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != header_.size())
    throw std::logic_error(fmt::format("Table row has {} cells, header has {}", cells.size(), header_.size()));
  rows_.push_back(std::move(cells));
}

namespace {
std::string csv_cell(const std::string& cell) {
  if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
  std::string quoted = "\"";
  for (char c : cell) quoted += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}
}  // namespace

void Table::print(std::ostream& out, TextFormat format) const {
  if (format == TextFormat::CSV) {
    auto line = [&](const std::vector<std::string>& cells) {
      for (std::size_t i = 0; i < cells.size(); ++i) out << (i ? "," : "") << csv_cell(cells[i]);
      out << '\n';
    };
    line(header_);
    for (const auto& r : rows_) line(r);
    return;
  }
  std::vector<std::size_t> width(header_.size());
  for (std::size_t i = 0; i < header_.size(); ++i) width[i] = header_[i].size();
  for (const auto& r : rows_)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      // first column left-aligned (names), the rest right-aligned (numbers)
      s += (i ? "  " : "") + (i == 0 ? fmt::format("{:<{}}", cells[i], width[i])
                                     : fmt::format("{:>{}}", cells[i], width[i]));
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out << s << '\n';
  };
  line(header_);
  std::size_t total = 0;
  for (auto w : width) total += w + 2;
  out << std::string(total > 2 ? total - 2 : 0, '-') << '\n';
  for (const auto& r : rows_) line(r);
}

}  // namespace dtsim
