// Shared pieces of the libFuzzer targets (tests/fuzz/README.md): a scratch folder per
// process on tmpfs, and input splitting.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace boxrt::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// A folder of this process's own, removed at exit (the fuzzer runs one process per job).
inline const std::string& scratch() {
  static const std::string dir = [] {
    std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string templ = base + "/boxrt-fuzz-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr)
      std::abort();
    static std::string remove = "rm -rf '" + templ + "'";
    std::atexit([] { [[maybe_unused]] int rc = std::system(remove.c_str()); });
    return templ;
  }();
  return dir;
}

/// Replaces the file `path` with `bytes`.
inline void write_file(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    std::abort();
  while (!bytes.empty()) {
    auto n = ::write(fd, bytes.data(), bytes.size());
    if (n <= 0)
      std::abort();
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  ::close(fd);
}

/// `text` cut at each `sep`, at most `max` parts (the last keeps the rest).
inline std::vector<std::string_view> split(std::string_view text, char sep, size_t max) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < max) {
    auto at = text.find(sep);
    if (at == std::string_view::npos)
      break;
    out.push_back(text.substr(0, at));
    text.remove_prefix(at + 1);
  }
  out.push_back(text);
  return out;
}

/// Fails the run (libFuzzer reports it as a crash with the input) when `ok` is false.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
    std::abort();
  }
}

} // namespace boxrt::fuzz
