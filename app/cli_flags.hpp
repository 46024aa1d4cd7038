// The flag reader of the command-line clients (boxctl, boxbench).
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace boxrt::cli {

/// Where a flag's value goes: text, a count, a signed number, a real number, or a
/// switch (a bool flag takes no value and sets true).
using flag_target = std::variant<std::string*, size_t*, int64_t*, double*, bool*>;

/// Reads flags from args[at] on while they are among `flags`, storing each value, and
/// returns the index of the first argument that is not one (args.size() at the end).
/// A flag without its value or with a value that is not a number where one is wanted
/// throws std::invalid_argument naming the flag.
inline size_t read_flags(const std::vector<std::string>& args, size_t at,
                         const std::map<std::string_view, flag_target>& flags) {
  for (; at < args.size(); ++at) {
    auto it = flags.find(args[at]);
    if (it == flags.end())
      return at;
    const std::string& name = args[at];
    if (auto* on = std::get_if<bool*>(&it->second)) {
      **on = true;
      continue;
    }
    if (at + 1 >= args.size())
      throw std::invalid_argument(name + " needs a value");
    const std::string& value = args[++at];
    try {
      size_t used = 0;
      if (auto* text = std::get_if<std::string*>(&it->second)) {
        **text = value;
        used = value.size();
      } else if (auto* count = std::get_if<size_t*>(&it->second)) {
        if (!value.empty() && value[0] == '-')
          throw std::invalid_argument(value);
        **count = std::stoull(value, &used);
      } else if (auto* number = std::get_if<int64_t*>(&it->second)) {
        **number = std::stoll(value, &used);
      } else {
        *std::get<double*>(it->second) = std::stod(value, &used);
      }
      if (used != value.size())
        throw std::invalid_argument(value);
    } catch (const std::logic_error&) {
      throw std::invalid_argument(name + " takes a number, not " + value);
    }
  }
  return at;
}

} // namespace boxrt::cli
