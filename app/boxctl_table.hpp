// boxctl's text output: aligned tables (two spaces between columns, as docker's) and
// sizes in binary units.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

namespace boxrt::boxctl {

/// "512 B", "1.5 KiB", "3.0 GiB"; "-" for a negative (unknown) count.
inline std::string human_bytes(int64_t n) {
  if (n < 0)
    return "-";
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(n));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

class table {
 public:
  explicit table(std::vector<std::string> header) : rows_{std::move(header)} {}

  void add(std::vector<std::string> row) {
    row.resize(rows_.front().size());
    rows_.push_back(std::move(row));
  }

  void print(std::ostream& out) const {
    std::vector<size_t> width(rows_.front().size(), 0);
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i)
        width[i] = std::max(width[i], r[i].size());
    for (const auto& r : rows_) {
      std::string line;
      for (size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size())
          line.append(width[i] - r[i].size() + 2, ' ');
      }
      out << line << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

} // namespace boxrt::boxctl
