# Turns a binary schema (.bfbs) into a C++ source holding it as a byte array.
# Usage: cmake -DIN=file.bfbs -DOUT=file.cpp -DSYMBOL=name -P embed_bfbs.cmake
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR n "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT}
  "// Generated from ${IN}; do not edit.\n"
  "#include <cstddef>\n#include <cstdint>\n"
  "namespace ptepack::schema {\n"
  "extern const uint8_t k_${SYMBOL}_bfbs[];\nextern const size_t k_${SYMBOL}_bfbs_size;\n"
  "alignas(16) const uint8_t k_${SYMBOL}_bfbs[] = {${bytes}};\n"
  "const size_t k_${SYMBOL}_bfbs_size = ${n};\n}\n")
