#pragma once
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace gpubox {

namespace detail {

// Pieces appended without a stream: strings, char, and integers that a stream prints as numbers
// (not bool, not the other character types).
template <typename T>
constexpr bool plain_piece = std::is_convertible_v<const T&, std::string_view> ||
                             std::is_same_v<T, char> ||
                             (std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                              !std::is_same_v<T, signed char> &&
                              !std::is_same_v<T, unsigned char> && !std::is_same_v<T, wchar_t> &&
                              !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> &&
                              !std::is_same_v<T, char32_t>);

template <typename T>
void append_piece(std::string& out, const T& v) {
    if constexpr (std::is_same_v<T, char>) {
        out += v;
    } else if constexpr (std::is_integral_v<T>) {
        char buf[24];
        out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    } else {
        out += std::string_view(v);
    }
}

}  // namespace detail

// Concatenate anything streamable: cat("step ", 3, "/", 9). Strings and integers are appended
// directly (cat() runs on the launcher's start-up path, where building an ostringstream per call
// was measurable); anything else, manipulators included, goes through an ostringstream.
template <typename... Args>
std::string cat(const Args&... args) {
    if constexpr ((detail::plain_piece<Args> && ...)) {
        std::string out;
        (detail::append_piece(out, args), ...);
        return out;
    } else {
        std::ostringstream out;
        (out << ... << args);
        return out.str();
    }
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

// The pieces of `text` between `sep`s, as std::getline reads them ("a/b/" is "a", "b"; "/a" is
// "", "a"; "" is none), the lines of `text` (without their '\n'), and the words of `text` (split
// at blanks and newlines), for the kernel's small text files and paths. Not by a stringstream:
// the first stream of a process sets up the C++ locale, ~0.4 ms of a run here.
inline std::vector<std::string_view> split_at(std::string_view text, char sep) {
    std::vector<std::string_view> out;
    while (!text.empty()) {
        const std::size_t at = text.find(sep);
        out.push_back(text.substr(0, at));
        text.remove_prefix(at == std::string_view::npos ? text.size() : at + 1);
    }
    return out;
}

inline std::vector<std::string_view> split_lines(std::string_view text) {
    return split_at(text, '\n');
}

// The pieces are views into the text: a temporary string would leave them dangling (a range-for
// keeps the vector alive, not the argument: split_at(text + ",", ',') did), so none is taken.
template <typename T>
using IfTemporaryString =
    std::enable_if_t<std::is_same_v<T, std::string>, std::vector<std::string_view>>;
template <typename T>
IfTemporaryString<T> split_at(T&& text, char sep) = delete;
template <typename T>
IfTemporaryString<T> split_lines(T&& text) = delete;
template <typename T>
IfTemporaryString<T> split_words(T&& text) = delete;

inline std::vector<std::string_view> split_words(std::string_view text) {
    std::vector<std::string_view> out;
    constexpr std::string_view kBlanks = " \t\n\r\v\f";
    for (std::size_t at = text.find_first_not_of(kBlanks); at != std::string_view::npos;) {
        const std::size_t end = std::min(text.find_first_of(kBlanks, at), text.size());
        out.push_back(text.substr(at, end - at));
        at = text.find_first_not_of(kBlanks, end);
    }
    return out;
}

// A whole decimal number, digits alone (no sign, no blank, nothing after), if it fits in T.
// std::from_chars: no locale, no copy, no allocation (a monitor's pass parses thousands).
template <typename T>
std::optional<T> parse_whole(std::string_view s) {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
    T v{};
    if (s.empty() || s.front() < '0' || s.front() > '9') return std::nullopt;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return v;
}

// Whether `word` is one of the words of `list` ("cpu memory pids": a cgroup's controllers).
inline bool has_word(std::string_view list, std::string_view word) {
    for (std::string_view w : split_words(list))
        if (w == word) return true;
    return false;
}

// A size as a SIZE option takes it back: "64M", "1G", "3K", else in bytes ("1000B").
inline std::string unit_size(std::uint64_t b) {
    if (b && b % (1ULL << 30) == 0) return cat(b >> 30, "G");
    if (b && b % (1ULL << 20) == 0) return cat(b >> 20, "M");
    if (b && b % (1ULL << 10) == 0) return cat(b >> 10, "K");
    return cat(b, "B");
}

// "12 KiB" (rounded up), "300 MiB", "1.5 GiB": a size for people.
inline std::string human_size(std::uint64_t b) {
    if (b < (1u << 20)) return cat((b + 1023) / 1024, " KiB");
    if (b < (1ull << 30)) return cat((b + (1u << 19)) >> 20, " MiB");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ull << 30));
    return buf;
}

}  // namespace gpubox
