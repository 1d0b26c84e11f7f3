#pragma once
// skopeo's and gpubox-unpack's failure text, turned into one line a user can act on. Pure.
#include <string>

#include "image/reference.hpp"

namespace gpubox::image {

// "authentication failed", "no such image or tag", "cannot connect to HOST:PORT", "digest
// mismatch (...)", "TLS: ...", or the tool's last line, sanitized and shortened.
std::string explain_pull_failure(const Source& source, const std::string& tool_stderr);

// The last non-empty line of `text`, control bytes replaced, at most `max` bytes.
std::string last_line(const std::string& text, std::size_t max = 300);

}  // namespace gpubox::image
