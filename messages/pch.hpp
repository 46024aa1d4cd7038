// Precompiled header of messages/ and backends/ (shared by both): the logging and JSON libraries and the
// standard headers nearly every unit includes.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>
