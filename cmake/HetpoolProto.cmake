# hetpool_proto_library(NAME ROOT_DIR dir PROTOS a/b.proto ... [PREPEND_INCLUDE h])
# Generates C++ messages and gRPC stubs for PROTOS (paths relative to ROOT_DIR) into the build tree
# and builds them as a static library NAME that exposes the generated headers. Every generated
# *.grpc.pb.h starts with `#include "request_parsing.h"` (proto/: how gRPC parses messages, the
# same in every translation unit), then PREPEND_INCLUDE when given (a header in proto/).
function(hetpool_proto_library name)
  cmake_parse_arguments(ARG "" "ROOT_DIR;PREPEND_INCLUDE" "PROTOS" ${ARGN})
  set(gen_dir ${CMAKE_CURRENT_BINARY_DIR}/gen)
  file(MAKE_DIRECTORY ${gen_dir})
  set(gen_srcs)
  foreach(proto ${ARG_PROTOS})
    string(REGEX REPLACE "\\.proto$" "" stem ${proto})
    set(out ${gen_dir}/${stem})
    set(prepend COMMAND ${CMAKE_COMMAND} -DFILE=${out}.grpc.pb.h "-DHEADERS=request_parsing.h;${ARG_PREPEND_INCLUDE}"
                -P ${PROJECT_SOURCE_DIR}/cmake/PrependInclude.cmake)
    add_custom_command(
      OUTPUT ${out}.pb.cc ${out}.pb.h ${out}.grpc.pb.cc ${out}.grpc.pb.h
      COMMAND protobuf::protoc --proto_path=${ARG_ROOT_DIR} --cpp_out=${gen_dir} --grpc_out=${gen_dir}
              --plugin=protoc-gen-grpc=${GRPC_CPP_PLUGIN} ${ARG_ROOT_DIR}/${proto}
      ${prepend}
      DEPENDS ${ARG_ROOT_DIR}/${proto} protobuf::protoc ${PROJECT_SOURCE_DIR}/cmake/PrependInclude.cmake
      COMMENT "protoc ${proto}")
    list(APPEND gen_srcs ${out}.pb.cc ${out}.grpc.pb.cc)
  endforeach()
  add_library(${name} STATIC ${gen_srcs})
  # protoc's output defines the same file-level names in every .pb.cc: never batched.
  set_target_properties(${name} PROPERTIES UNITY_BUILD OFF)
  target_include_directories(${name} SYSTEM PUBLIC ${gen_dir})
  target_link_libraries(${name} PUBLIC hetpool_request_parsing protobuf::libprotobuf gRPC::grpc++)
endfunction()
