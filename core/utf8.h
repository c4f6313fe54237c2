// Text that is safe to print from bytes that may not be: a byte-level model's sample is whatever
// bytes it generated, often a UTF-8 sequence cut in half or a lone continuation byte, and tools
// that read Loom's output as text (a log shipper, a protobuf string field, Python's decoder)
// refuse invalid UTF-8. Escaping rather than U+FFFD keeps the byte's value for the reader.
#pragma once

#include <string>
#include <string_view>

namespace loom {

// `raw` as valid UTF-8 that prints as one block of text: well-formed UTF-8 sequences (shortest
// form, no surrogates, at most U+10FFFF) and printable ASCII are kept as they are, and so are
// '\n' and '\t'; every other byte (an invalid or truncated sequence's bytes, other ASCII control
// characters such as '\r', ESC or NUL, and DEL) becomes the four characters "\xNN" (lower-case
// hex). A backslash in `raw` is kept as it is, so the escaping cannot always be undone: "\x80"
// may be four characters of the text or one byte. Pure; the result is never shorter than `raw`.
std::string PrintableUtf8(std::string_view raw);

}  // namespace loom
