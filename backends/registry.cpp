// Backend selection. Only the scripted backend is built in so far; the isolating
// drivers (bwrap, nsjail) and the dev-only process backend are reported as missing
// under their own names, never replaced by another backend.
#include "backends/registry.hpp"

#include <string_view>

#include "backends/scripted.hpp"

namespace boxrt {

namespace {

std::string_view strip(std::string_view s) noexcept {
  constexpr std::string_view space = " \t\n\v\f\r";
  auto first = s.find_first_not_of(space);
  if (first == std::string_view::npos)
    return {};
  auto last = s.find_last_not_of(space);
  return s.substr(first, last - first + 1);
}

} // namespace

backend_choice select_backend(const box_config& config) {
  auto requested = strip(config.backend);
  if (requested == "scripted")
    return {std::make_shared<scripted_backend>(config.scripted), "scripted", ""};
  if (requested.empty() || requested == "auto" || requested == "local" || requested == "bwrap")
    return {nullptr, "bwrap", "bubblewrap backend is not available in this build"};
  if (requested == "nsjail")
    return {nullptr, "nsjail", "nsjail backend is not available in this build"};
  if (requested == "process")
    return {nullptr, "process", "process backend is not available in this build"};
  std::string name{requested};
  return {nullptr, name,
          "LangBot Box backend \"" + name
            + "\" not found (known backends: auto, bwrap, nsjail, process, scripted)"};
}

std::string backend_unavailable_message() {
  return "LangBot Box backend unavailable. Install and start Docker or nsjail before using "
         "exec.";
}

} // namespace boxrt
