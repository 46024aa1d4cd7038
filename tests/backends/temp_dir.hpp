// A directory under /tmp that a test owns and that is removed with everything in it.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace boxrt::testing {

class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = "/tmp/boxrt-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error{"mkdtemp failed"};
    path_ = tmpl;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code err;
    std::filesystem::remove_all(path_, err);
  }

  /// The directory, or `sub` inside it.
  std::string str(const std::string& sub = {}) const {
    return sub.empty() ? path_ : path_ + "/" + sub;
  }

 private:
  std::string path_;
};

} // namespace boxrt::testing
