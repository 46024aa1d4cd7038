// boxrt's version: the project's release number, `git describe` of the tree it was
// built from and the build type (generated at build time, app/cmake/version.cmake).
// Shown by `boxd --version`, `boxctl --version`, /healthz and boxd_build_info on /metrics.
#pragma once

#include <string>
#include <string_view>

namespace boxrt {

/// The release number ("0.9.0").
std::string_view version();
/// `git describe --always --dirty --tags` of the source tree ("unknown" outside git).
std::string_view git_describe();
/// CMAKE_BUILD_TYPE ("RelWithDebInfo").
std::string_view build_type();
/// "boxrt 0.9.0 (git d45e02a, RelWithDebInfo)".
std::string version_line();

} // namespace boxrt
