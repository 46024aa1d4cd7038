// Skill zip preview (backends/skills/skill_zip.cpp, backends/skills/skill_store.cpp): the input is an
// uploaded archive, checked member by member, extracted beneath a folder descriptor
// and read for SKILL.md packages. Nothing may be left behind in the upload folder.
#include <dirent.h>
#include <sys/stat.h>

#include "backends/skills/skill_store.hpp"
#include "fuzz_common.hpp"

using namespace boxrt;

namespace {

size_t entries(const std::string& dir) {
  size_t n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d))
      if (std::string_view{e->d_name} != "." && std::string_view{e->d_name} != "..")
        ++n;
    ::closedir(d);
  }
  return n;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::scratch();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string uploads = fuzz::scratch() + "/uploads";
  static const std::string archive = fuzz::scratch() + "/upload.zip";
  static skills::store store{fuzz::scratch() + "/skills", uploads};
  static bool made = [] {
    fuzz::write_file(archive, "");
    return ::mkdir(uploads.c_str(), 0700) == 0;
  }();
  (void) made;
  fuzz::write_file(archive, fuzz::as_text(data, size));
  (void) store.preview_zip(archive);
  fuzz::require(entries(uploads) == 0, "a preview leaves nothing in the upload folder");
  return 0;
}
