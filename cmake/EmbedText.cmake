# hetpool_embed_text(OUTPUT file.cc FILE source FUNCTION ns::Name HEADER path.h): writes a C++
# file defining `std::string_view ns::Name()` with the bytes of `source`, re-made when it changes.
function(hetpool_embed_text)
  cmake_parse_arguments(ARG "" "OUTPUT;FILE;FUNCTION;HEADER" "" ${ARGN})
  file(READ ${ARG_FILE} hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
  string(REGEX REPLACE "::[^:]+$" "" namespace "${ARG_FUNCTION}")
  string(REGEX REPLACE "^.*::" "" name "${ARG_FUNCTION}")
  set(body "#include \"${ARG_HEADER}\"\n\nnamespace ${namespace} {\nnamespace {\nconst char kText[] = {${bytes} 0};\n}  // namespace\n\n")
  string(APPEND body "std::string_view ${name}() { return std::string_view(kText, sizeof(kText) - 1); }\n\n}  // namespace ${namespace}\n")
  file(WRITE ${ARG_OUTPUT}.tmp "${body}")
  configure_file(${ARG_OUTPUT}.tmp ${ARG_OUTPUT} COPYONLY)  # rewritten only when it changes
endfunction()
