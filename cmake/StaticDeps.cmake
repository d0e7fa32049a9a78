# Links gRPC, Protobuf, Abseil, c-ares, re2 and zlib from the archives their Debian -dev packages
# ship, where they do, instead of 60 shared libraries. hetpoolctl is run once per command (a CI
# loop runs it hundreds of times): half of its start was the dynamic loader's symbol lookups and
# relocations across those libraries, and the kernel's mapping of them (docs/benchmarks.md,
# "A light CLI"). OpenSSL stays shared (libraries that stay shared, civetweb's, use it too), and
# so do the others: they have no gRPC, Protobuf or Abseil inside, so no second copy of one is
# ever loaded beside the static one.
#
# An imported target keeps its name and its interface (include dirs, dependencies); only the file
# it names changes. Static archives must come after what uses them on the link line, and the
# packages' dependency lists are written for shared linking (where each library carries its own
# dependencies), so every executable's libraries are linked as one group the linker rescans.
option(HETPOOL_STATIC_DEPS "Link gRPC, Protobuf and Abseil statically where their archives are installed" ON)

function(hetpool_use_static_archives)
  if(NOT HETPOOL_STATIC_DEPS)
    return()
  endif()
  get_property(imported DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTY IMPORTED_TARGETS)
  set(switched 0)
  set(grpc_static OFF)
  set(re2_static OFF)
  foreach(target IN LISTS imported)
    if(NOT target MATCHES "^(gRPC|protobuf|absl|c-ares|re2)::" AND NOT target STREQUAL "ZLIB::ZLIB")
      continue()
    endif()
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "SHARED_LIBRARY|UNKNOWN_LIBRARY")
      continue()
    endif()
    foreach(property IMPORTED_LOCATION IMPORTED_LOCATION_NONE IMPORTED_LOCATION_RELEASE IMPORTED_LOCATION_NOCONFIG
                     IMPORTED_LOCATION_RELWITHDEBINFO)
      get_target_property(location ${target} ${property})
      if(location AND location MATCHES "\\.so(\\.[0-9.]+)?$")
        string(REGEX REPLACE "\\.so(\\.[0-9.]+)?$" ".a" archive "${location}")
        if(EXISTS "${archive}")
          set_target_properties(${target} PROPERTIES ${property} "${archive}")
          math(EXPR switched "${switched} + 1")
          if(target STREQUAL "gRPC::grpc++")
            set(grpc_static ON)
          endif()
        endif()
      endif()
    endforeach()
  endforeach()
  # re2 comes through pkg-config (gRPC's Findre2): an interface whose libraries say "-lre2".
  find_library(HETPOOL_RE2_ARCHIVE NAMES libre2.a)
  if(TARGET re2::re2 AND HETPOOL_RE2_ARCHIVE)
    get_target_property(re2_libraries re2::re2 INTERFACE_LINK_LIBRARIES)
    if("-lre2" IN_LIST re2_libraries)
      list(TRANSFORM re2_libraries REPLACE "^-lre2$" "${HETPOOL_RE2_ARCHIVE}")
      set_target_properties(re2::re2 PROPERTIES INTERFACE_LINK_LIBRARIES "${re2_libraries}")
      math(EXPR switched "${switched} + 1")
      set(re2_static ON)
    endif()
  endif()
  # Whether no C++ library of gRPC's stays shared: only then may a program (hetpoolctl) carry
  # its own C++ runtime without a second one loaded beside it.
  if(grpc_static AND re2_static)
    set(HETPOOL_NO_SHARED_GRPC_CXX ON PARENT_SCOPE)
  else()
    set(HETPOOL_NO_SHARED_GRPC_CXX OFF PARENT_SCOPE)
  endif()
  if(switched GREATER 0)
    set(CMAKE_CXX_LINK_EXECUTABLE
        "<CMAKE_CXX_COMPILER> <FLAGS> <CMAKE_CXX_LINK_FLAGS> <LINK_FLAGS> <OBJECTS> -o <TARGET> -Wl,--start-group <LINK_LIBRARIES> -Wl,--end-group"
        PARENT_SCOPE)
    message(STATUS "hetpool: ${switched} library locations of gRPC, Protobuf and Abseil linked from their archives")
  endif()
endfunction()
