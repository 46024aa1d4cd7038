// Precompiled header of every test suite: Boost.Test is the heavy part. Each suite's
// main.cpp, which defines BOOST_TEST_MODULE before this header, skips it.
#pragma once
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <simdjson.h>
