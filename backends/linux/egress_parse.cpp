#include "backends/linux/egress_parse.hpp"


#include <algorithm>
#include <cctype>

namespace boxrt::egress {

namespace {

/// A bounds-checked cursor over bytes.
struct cursor {
  const uint8_t* p;
  size_t left;
  bool ok = true;

  cursor(const void* data, size_t n) : p(static_cast<const uint8_t*>(data)), left(n) {}

  uint32_t read(int bytes) {
    if (!ok || left < static_cast<size_t>(bytes)) {
      ok = false;
      return 0;
    }
    uint32_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v = (v << 8) | p[i];
    p += bytes;
    left -= bytes;
    return v;
  }
  void skip(size_t n) {
    if (!ok || left < n) {
      ok = false;
      return;
    }
    p += n;
    left -= n;
  }
  /// A sub-cursor over the next `n` bytes (skipped here).
  cursor take(size_t n) {
    cursor sub{p, ok && left >= n ? n : 0};
    sub.ok = ok && left >= n;
    skip(n);
    return sub;
  }
};

/// The SNI host_name of a whole ClientHello body (after the handshake header).
peek_result client_hello_sni(cursor hello) {
  peek_result out;
  out.tls = true;
  hello.skip(2 + 32);                 // legacy_version, random
  hello.skip(hello.read(1));          // legacy_session_id
  hello.skip(hello.read(2));          // cipher_suites
  hello.skip(hello.read(1));          // legacy_compression_methods
  if (!hello.ok) {
    out.status = peek_status::not_http;
    return out;
  }
  if (hello.left == 0) {
    out.status = peek_status::no_name;  // no extensions at all
    return out;
  }
  auto extensions = hello.take(hello.read(2));
  while (extensions.ok && extensions.left >= 4) {
    auto type = extensions.read(2);
    auto body = extensions.take(extensions.read(2));
    if (!extensions.ok)
      break;
    if (type != 0)  // server_name
      continue;
    auto list = body.take(body.read(2));
    while (list.ok && list.left >= 3) {
      auto kind = list.read(1);
      auto len = list.read(2);
      auto name = list.take(len);
      if (!list.ok)
        break;
      if (kind == 0) {  // host_name
        out.status = peek_status::name;
        out.name.assign(reinterpret_cast<const char*>(name.p), len);
        return out;
      }
    }
    break;
  }
  out.status = extensions.ok ? peek_status::no_name : peek_status::not_http;
  return out;
}

peek_result tls_name(std::string_view data) {
  peek_result out;
  out.tls = true;
  if (data.size() < 5)
    return out;
  cursor rec{data.data(), data.size()};
  rec.read(1);                 // content type 22
  rec.read(2);                 // legacy record version
  auto length = rec.read(2);
  if (length == 0 || length > 16384) {
    out.status = peek_status::not_http;
    return out;
  }
  if (rec.left < length)
    return out;  // need the whole record
  auto body = rec.take(length);
  if (body.read(1) != 1) {     // handshake type client_hello
    out.status = peek_status::not_http;
    return out;
  }
  auto hello_len = body.read(3);
  if (!body.ok || hello_len > body.left) {
    // A ClientHello split over several records: boxd does not reassemble it.
    out.status = peek_status::no_name;
    return out;
  }
  return client_hello_sni(body.take(hello_len));
}

bool iequals_prefix(std::string_view line, std::string_view prefix) {
  if (line.size() < prefix.size())
    return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(line[i])) != prefix[i])
      return false;
  return true;
}

peek_result http_host(std::string_view data) {
  peek_result out;
  // The request line must look like one: a method of capital letters, a space.
  size_t i = 0;
  while (i < data.size() && i < 16 && data[i] >= 'A' && data[i] <= 'Z')
    ++i;
  if (i == data.size())
    return out;
  if (i == 0 || i >= 16 || data[i] != ' ') {
    out.status = peek_status::not_http;
    return out;
  }
  auto end = data.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (data.size() >= max_peek_bytes)
      out.status = peek_status::no_name;
    return out;
  }
  auto head = data.substr(0, end + 2);
  size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos && pos + 2 < head.size()) {
    auto next = head.find("\r\n", pos + 2);
    auto line = head.substr(pos + 2, next - pos - 2);
    if (iequals_prefix(line, "host:")) {
      auto value = line.substr(5);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
        value.remove_prefix(1);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
        value.remove_suffix(1);
      // host[:port]; a bracketed IPv6 literal is no name.
      if (!value.empty() && value.front() != '[')
        value = value.substr(0, value.find(':'));
      out.status = value.empty() ? peek_status::no_name : peek_status::name;
      out.name = std::string{value};
      return out;
    }
    pos = next;
  }
  out.status = peek_status::no_name;
  return out;
}

}  // namespace

peek_result peek_name(std::string_view data) {
  if (data.empty())
    return {};
  if (static_cast<uint8_t>(data[0]) == 22)
    return tls_name(data);
  return http_host(data);
}

std::optional<dns_question> parse_dns_query(std::string_view query) {
  if (query.size() < 12 || query.size() > 65535)
    return std::nullopt;
  auto byte = [&](size_t i) { return static_cast<uint8_t>(query[i]); };
  // A query (QR 0, opcode 0) with exactly one question.
  if ((byte(2) & 0x80) != 0 || ((byte(2) >> 3) & 0x0F) != 0 || byte(4) != 0 || byte(5) != 1)
    return std::nullopt;
  dns_question q;
  size_t i = 12;
  while (true) {
    if (i >= query.size())
      return std::nullopt;
    auto len = byte(i);
    if (len == 0) {
      ++i;
      break;
    }
    if (len > 63 || i + 1 + len > query.size())
      return std::nullopt;  // compression pointers have no place in a question
    // The name checked is the name asked: no dot (nor anything else) inside a label.
    for (size_t k = i + 1; k < i + 1 + len; ++k) {
      char c = query[k];
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
        return std::nullopt;
    }
    if (!q.name.empty())
      q.name += '.';
    q.name.append(query.substr(i + 1, len));
    i += 1 + len;
    if (q.name.size() > 253)
      return std::nullopt;
  }
  if (i + 4 > query.size())
    return std::nullopt;
  q.type = static_cast<uint16_t>((byte(i) << 8) | byte(i + 1));
  q.end = i + 4;
  return q;
}

std::string dns_reply(std::string_view query, size_t question_end, int rcode) {
  std::string out{query.substr(0, std::min(question_end, query.size()))};
  if (out.size() < 12)
    return out;
  out[2] = static_cast<char>(0x80 | (static_cast<uint8_t>(out[2]) & 0x79));  // QR, keep opcode and RD
  out[3] = static_cast<char>(0x80 | (rcode & 0x0F));                           // RA, rcode
  for (int i = 6; i < 12; ++i)
    out[i] = 0;  // no answers, authority or additional records
  return out;
}

}  // namespace boxrt::egress
