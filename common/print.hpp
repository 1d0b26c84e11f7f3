#pragma once
// gpubox's own text on its stdout and stderr, written whole and unbuffered by write(2), in the
// order it is printed. Not by iostreams: a static binary whose code includes <iostream> sets up
// the standard streams and the locale in every process it starts (~0.5 ms here), used or not.
// A reader that went away ends the writing, as it ended std::cout's (SIGPIPE where it is not
// ignored, else the rest is dropped).
#include <string_view>

namespace gpubox {

void print(std::string_view text);      // stdout
void print_err(std::string_view text);  // stderr

}  // namespace gpubox
