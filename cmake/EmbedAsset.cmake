# Writes a C++ source defining `std::string_view NAME()` with the bytes of INPUT, for web assets
# built into the binary (no CDN, no files at run time). Run as a script:
#   cmake -DINPUT=file -DOUTPUT=file.cc -DNAME=Symbol -P EmbedAsset.cmake
# The text goes in raw string literals of at most 8000 bytes each (compilers need not accept
# longer literals), joined once at first use.
file(READ "${INPUT}" content)
string(LENGTH "${content}" length)
set(body "")
set(chunk 8000)
set(offset 0)
while(offset LESS length)
  string(SUBSTRING "${content}" ${offset} ${chunk} piece)
  string(APPEND body "    R\"loom_asset(${piece})loom_asset\",\n")
  math(EXPR offset "${offset} + ${chunk}")
endwhile()
file(WRITE "${OUTPUT}.tmp" "// Generated from ${INPUT} by cmake/EmbedAsset.cmake: do not edit.
#include <string>
#include <string_view>

namespace loom {

std::string_view ${NAME}() {
  static const char* const kPieces[] = {
${body}    nullptr};
  static const std::string kText = [] {
    std::string s;
    for (const char* const* p = kPieces; *p != nullptr; ++p) s += *p;
    return s;
  }();
  return kText;
}

}  // namespace loom
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
