// boxd's configuration file (app/boxd_config.cpp): the `server` and `box` sections and
// the server checks, read from a real file as `boxd --config FILE` reads it. A config
// that loads must pass the server's own validation.
#include "app/boxd_config.hpp"
#include "fuzz_common.hpp"
#include "net/ws/server_options.hpp"

using namespace boxrt;

namespace {

std::string no_env(const char*) {
  return {};
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::scratch();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch() + "/config.json";
  fuzz::write_file(path, fuzz::as_text(data, size));
  auto cfg = load_boxd_config({"--config", path}, no_env);
  if (cfg)
    fuzz::require(net::validate(cfg.value().server).empty(), "a loaded config passes validation");
  return 0;
}
