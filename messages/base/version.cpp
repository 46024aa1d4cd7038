#include "messages/base/version.hpp"

#include "boxrt_version_generated.hpp"

namespace boxrt {

std::string_view version() {
  return BOXRT_VERSION;
}

std::string_view git_describe() {
  return BOXRT_GIT_DESCRIBE;
}

std::string_view build_type() {
  return BOXRT_BUILD_TYPE;
}

std::string version_line() {
  return "boxrt " + std::string{version()} + " (git " + std::string{git_describe()} + ", "
         + std::string{build_type()} + ")";
}

} // namespace boxrt
