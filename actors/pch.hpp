// Precompiled header of the CAF-using targets: CAF is heavy, parse it once.
#pragma once
#include <caf/all.hpp>
