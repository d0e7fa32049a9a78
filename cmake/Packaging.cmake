# `cmake --install` layout and CPack Debian packages, one per component (docs/operations.md):
#   hetpool-daemon  hetpoold, its systemd unit, an example config, monitoring files
#   hetpool-agent   hetpool-agent, hetpool-inventory, its systemd unit, an example config
#   hetpoolctl      the CLI, its bash completion, pki.sh
include(GNUInstallDirs)

install(TARGETS hetpoold RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT daemon)
install(TARGETS hetpool-agent RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT agent)
install(TARGETS hetpoolctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)

set(HETPOOL_SHARE ${CMAKE_INSTALL_DATADIR}/hetpool)
install(FILES deploy/systemd/hetpoold.service DESTINATION lib/systemd/system COMPONENT daemon)
install(FILES deploy/etc/hetpoold.json deploy/examples/quotas.json deploy/examples/prices.json
        DESTINATION ${HETPOOL_SHARE}/examples COMPONENT daemon)
install(FILES deploy/scheduler-profile.json DESTINATION ${HETPOOL_SHARE} COMPONENT daemon)
install(DIRECTORY deploy/monitoring/ DESTINATION ${HETPOOL_SHARE}/monitoring COMPONENT daemon)
install(FILES README.md docs/operations.md docs/security.md DESTINATION ${CMAKE_INSTALL_DOCDIR}/../hetpool-daemon
        COMPONENT daemon)

install(FILES deploy/systemd/hetpool-agent.service DESTINATION lib/systemd/system COMPONENT agent)
install(FILES deploy/etc/agent.json DESTINATION ${HETPOOL_SHARE}/examples COMPONENT agent)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}/../hetpool-agent COMPONENT agent)

install(FILES deploy/completion/hetpoolctl.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME hetpoolctl COMPONENT cli)
install(PROGRAMS deploy/pki.sh DESTINATION ${HETPOOL_SHARE} COMPONENT cli)

set(CPACK_PACKAGE_NAME hetpool)
set(CPACK_PACKAGE_VENDOR "hetpool")
set(CPACK_PACKAGE_CONTACT "hetpool maintainers <hetpool@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Orchestrator for heterogeneous GPU pools")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon agent cli)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends from the binaries' libraries (dpkg-shlibdeps)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME hetpool-daemon)
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_DAEMON_PACKAGE_SUGGESTS "etcd-server, hetpoolctl")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/deploy/debian/daemon/postinst)
set(CPACK_DEBIAN_AGENT_PACKAGE_NAME hetpool-agent)
set(CPACK_DEBIAN_AGENT_PACKAGE_RECOMMENDS "python3-torch")
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/deploy/debian/agent/postinst)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME hetpoolctl)
set(CPACK_DEBIAN_CLI_PACKAGE_RECOMMENDS "openssl, bash-completion")
set(CPACK_COMPONENT_DAEMON_DESCRIPTION "hetpool control-plane daemon (hetpoold): inventory, durable queue, scheduler")
set(CPACK_COMPONENT_AGENT_DESCRIPTION "hetpool node agent: device discovery through vendor libraries, torchrun launches")
set(CPACK_COMPONENT_CLI_DESCRIPTION "hetpoolctl: the hetpool command-line client, bash completion and pki.sh")
include(CPack)
