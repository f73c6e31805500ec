# src/toolchain/embed.cmake: turns the headers generated code includes
# (include/kiln/abi.h and the kernel headers) into C byte arrays, so that an
# installed kiln writes them next to the code it generates and needs no
# source tree. Run by CMake at build time:
#   cmake -DOUT=file.c -DHEADERS="a.h|b.h" -DROOT=<source dir> -P embed.cmake
string(REPLACE "|" ";" headers "${HEADERS}")
set(body "/* Generated at build time by src/toolchain/embed.cmake. Do not edit. */\n#include <stddef.h>\n\n#include \"toolchain/toolchain.h\"\n\n")
set(table "")
set(i 0)
foreach(h ${headers})
  file(READ "${h}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" hex "${hex}")
  get_filename_component(base "${h}" NAME)
  if(base STREQUAL "abi.h")
    set(name "kiln/abi.h")
  else()
    set(name "${base}")
  endif()
  string(APPEND body "static const unsigned char file${i}[] = {\n${hex}0x00};\n")
  string(APPEND table "    {\"${name}\", file${i}, sizeof file${i} - 1},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND body "\nconst kiln_embedded_file kiln_embedded_headers[] = {\n${table}};\nconst int kiln_embedded_header_count = ${i};\n")
file(WRITE "${OUT}.tmp" "${body}")
file(RENAME "${OUT}.tmp" "${OUT}")
