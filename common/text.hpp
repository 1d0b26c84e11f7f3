#pragma once
#include <sstream>
#include <string>
#include <string_view>

namespace gpubox {

// Concatenate anything streamable: cat("step ", 3, "/", 9).
template <typename... Args>
std::string cat(const Args&... args) {
    std::ostringstream out;
    (out << ... << args);
    return out.str();
}

// A path or string in double quotes, with quotes, backslashes and control bytes escaped,
// so a hostile file name cannot forge a second line in an error message.
inline std::string quote(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
            static const char* hex = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

template <typename Range>
std::string join(const Range& items, std::string_view sep) {
    std::string out;
    for (const auto& item : items) {
        if (!out.empty()) out += sep;
        out += item;
    }
    return out;
}

inline bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

}  // namespace gpubox
