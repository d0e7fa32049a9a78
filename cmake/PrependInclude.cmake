# cmake -DFILE=generated.grpc.pb.h "-DHEADERS=a.h;b.h" -P PrependInclude.cmake
# Puts `#include "a.h"` (and so on) at the top of FILE, before anything that could instantiate a
# gRPC template, so the specializations they declare are seen wherever FILE is included.
file(READ ${FILE} body)
set(head "// Prepended by cmake/PrependInclude.cmake.\n")
foreach(header ${HEADERS})
  string(APPEND head "#include \"${header}\"\n")
endforeach()
file(WRITE ${FILE} "${head}${body}")
