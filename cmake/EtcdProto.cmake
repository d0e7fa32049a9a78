# The etcd v3 API for the highly available store, generated from the .proto files Debian's
# golang-etcd-server-dev ships (never copied into the repository). Their gogoproto and
# google.api annotations only matter to Go and the HTTP gateway; they are stripped into the
# build tree, keeping etcd's own import paths ("etcd/...").
set(HETPOOL_ETCD_PROTO_SOURCE /usr/share/gocode/src/go.etcd.io/etcd CACHE PATH
    "etcd source tree with the v3 .proto files (Debian: golang-etcd-server-dev)")
if(NOT EXISTS ${HETPOOL_ETCD_PROTO_SOURCE}/etcdserver/etcdserverpb/rpc.proto)
  message(FATAL_ERROR "etcd's .proto files are missing under ${HETPOOL_ETCD_PROTO_SOURCE}: "
                      "install golang-etcd-server-dev (deploy/lib/common.sh does)")
endif()

set(HETPOOL_ETCD_PROTO_ROOT ${CMAKE_BINARY_DIR}/etcd_proto)
set(HETPOOL_ETCD_PROTOS
    etcd/mvcc/mvccpb/kv.proto
    etcd/auth/authpb/auth.proto
    etcd/etcdserver/etcdserverpb/rpc.proto
    etcd/etcdserver/api/v3election/v3electionpb/v3election.proto)
foreach(proto ${HETPOOL_ETCD_PROTOS})
  string(REGEX REPLACE "^etcd/" "" relative ${proto})
  set(source ${HETPOOL_ETCD_PROTO_SOURCE}/${relative})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${source})
  file(READ ${source} text)
  string(REPLACE "import \"gogoproto/gogo.proto\";" "" text "${text}")
  string(REPLACE "import \"google/api/annotations.proto\";" "" text "${text}")
  string(REGEX REPLACE "option \\(gogoproto\\.[a-z_]+\\) = [a-z]+;" "" text "${text}")
  string(REGEX REPLACE "\\[\\(gogoproto[^]]*\\]" "" text "${text}")
  # The http options hold one level of nested braces (additional_bindings { ... }).
  string(REGEX REPLACE "option \\(google\\.api\\.http\\) = {([^{}]|{[^{}]*})*};" "" text "${text}")
  set(target_file ${HETPOOL_ETCD_PROTO_ROOT}/${proto})
  set(existing "")
  if(EXISTS ${target_file})
    file(READ ${target_file} existing)
  endif()
  if(NOT existing STREQUAL text)  # rewrite only on change, so nothing rebuilds needlessly
    file(WRITE ${target_file} "${text}")
  endif()
endforeach()
