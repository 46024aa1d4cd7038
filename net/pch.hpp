// Precompiled header of net/: CAF and Beast are the heavy parts.
#pragma once
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <caf/all.hpp>
