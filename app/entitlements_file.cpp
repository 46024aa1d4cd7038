#include "app/entitlements_file.hpp"

#include <fstream>
#include <iterator>
#include <system_error>

#include <fmt/format.h>
#include <simdjson.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "messages/codec.hpp"
#include "messages/codec_text.hpp"

namespace boxrt {

result<std::vector<entitlement_snapshot>> read_entitlements_file(const std::string& path) {
  auto fail = [&](std::string why) {
    return box_error{ec::value, fmt::format("entitlements file {}: {}", path, why)};
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return fail(std::error_code{errno, std::generic_category()}.message());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  if (static_cast<size_t>(st.st_size) > max_entitlements_file_bytes) {
    ::close(fd);
    return fail(fmt::format("larger than {} bytes", max_entitlements_file_bytes));
  }
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < text.size()) {
    auto n = ::read(fd, text.data() + got, text.size() - got);
    if (n <= 0)
      break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  auto decoded = decode_text(text, [&](const simdjson::dom::element& root)
                             -> result<std::vector<entitlement_snapshot>> {
    simdjson::dom::array items;
    if (root.get_array().get(items) != simdjson::SUCCESS)
      return fail("must be a JSON array of entitlement snapshots");
    std::vector<entitlement_snapshot> out;
    size_t index = 0;
    for (auto item : items) {
      auto snap = decode_entitlement_snapshot(item);
      if (!snap)
        return fail(fmt::format("snapshot {}: {}", index, snap.error().message));
      out.push_back(std::move(snap.value()));
      ++index;
    }
    return out;
  });
  if (!decoded && decoded.error().message.rfind("entitlements file", 0) != 0)
    return fail(decoded.error().message);
  return decoded;
}

} // namespace boxrt
