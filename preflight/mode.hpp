#pragma once
// gpubox run --preflight off|warn|enforce.
#include <string>

namespace gpubox::preflight {

enum class Mode { off, warn, enforce };
Mode parse_mode(const std::string& text);  // throws UsageError
const char* to_string(Mode m);

}  // namespace gpubox::preflight
