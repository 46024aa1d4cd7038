#include "backends/cluster/upload.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include <stdlib.h>
#include <unistd.h>

#include "messages/base/unique_fd.hpp"

namespace boxrt::cluster {

void carry_upload(skill_request& req) {
  if (req.file_path.empty() || !req.file_bytes.empty())
    return;
  std::ifstream in{req.file_path, std::ios::binary};
  req.file_bytes.assign(std::istreambuf_iterator<char>{in}, {});
  ::unlink(req.file_path.c_str()); // consumed here: the owner holds its own copy
  req.file_path = req.file_bytes.empty() ? std::string{} : std::string{"forwarded"};
}

box_error land_upload(skill_request& req, const std::string& dir, bool from_remote) {
  if (from_remote)
    req.file_path.clear();
  if (req.file_bytes.size() > max_forwarded_upload)
    return {ec::validation, "Box cluster refuses a forwarded upload larger than "
                              + std::to_string(max_forwarded_upload) + " bytes"};
  if (req.file_bytes.empty())
    return {};
  std::string path = dir + "/upload-XXXXXX";
  unique_fd fd{::mkstemp(path.data())};
  if (!fd)
    return {ec::runtime_unavailable,
            "Box cluster cannot land a forwarded upload in " + dir + ": " + std::strerror(errno)};
  if (!write_all(fd.get(), req.file_bytes)) {
    ::unlink(path.c_str());
    return {ec::runtime_unavailable, "Box cluster cannot land a forwarded upload in " + dir};
  }
  req.file_path = path;
  req.file_bytes.clear();
  return {};
}

} // namespace boxrt::cluster
