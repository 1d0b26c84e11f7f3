#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "common/text.hpp"
#include "rootfs/paths.hpp"

using namespace gpubox;
using namespace gpubox::rootfs;

TEST_CASE("normalize_container_path") {
    auto [in, out] = GENERATE(table<std::string, std::string>(
        {{"/", "/"}, {"//a//b/", "/a/b"}, {"/a/./b", "/a/b"}, {"/.", "/"}, {"/a/b/.", "/a/b"}}));
    CHECK(normalize_container_path(in, "t") == out);
}

TEST_CASE("normalize_container_path rejects relative, dot-dot, NUL and empty") {
    auto in = GENERATE(as<std::string>{}, "", "a/b", "/a/../b", "/..", std::string("/a\0b", 4));
    CHECK_THROWS_AS(normalize_container_path(in, "t"), UsageError);
}

TEST_CASE("is_within, parent_of, base_name") {
    CHECK(is_within("/dev/null", "/dev"));
    CHECK(is_within("/dev", "/dev"));
    CHECK_FALSE(is_within("/devices", "/dev"));
    CHECK(is_within("/x", "/"));
    CHECK(parent_of("/a/b") == "/a");
    CHECK(parent_of("/a") == "/");
    CHECK(base_name("/a/b") == "b");
    CHECK(split_path("/a//b/") == std::vector<std::string>{"a", "b"});
}

TEST_CASE("is_plain_name, is_plain_path: one entry, and a path spelled only with such entries") {
    CHECK(is_plain_name("libcuda.so.1"));
    for (const char* bad : {"", ".", "..", "a/b"}) CHECK_FALSE(is_plain_name(bad));
    CHECK(is_plain_path("/usr/lib/x86_64-linux-gnu"));
    CHECK(is_plain_path("/a"));
    for (const char* bad : {"/", "", "a/b", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/a/.."})
        CHECK_FALSE(is_plain_path(bad));
}

TEST_CASE("split_at, split_lines and split_words: text files and paths without a stream") {
    using V = std::vector<std::string_view>;
    // as std::getline(in, piece, '/') reads them
    CHECK(split_at("a/b/", '/') == V{"a", "b"});
    CHECK(split_at("/a//b", '/') == V{"", "a", "", "b"});
    CHECK(split_at("/", '/') == V{""});
    CHECK(split_at("", '/').empty());
    CHECK(split_at("1:100,2:200", ',') == V{"1:100", "2:200"});
    CHECK(split_lines("0::/a\n1:cpu:/\n") == V{"0::/a", "1:cpu:/"});
    CHECK(split_lines("no newline") == V{"no newline"});
    CHECK(split_lines("a\n\nb") == V{"a", "", "b"});
    CHECK(split_lines("").empty());
    CHECK(split_words("  cpu  memory\tpids\n") == V{"cpu", "memory", "pids"});
    CHECK(split_words("usage_usec 123") == V{"usage_usec", "123"});
    CHECK(split_words(" \n\t").empty());
}

TEST_CASE("parse_whole: a whole decimal number that fits, or nothing") {
    CHECK(parse_whole<std::uint64_t>("0") == 0u);
    CHECK(parse_whole<std::uint64_t>("18446744073709551615") == 18446744073709551615ull);
    CHECK(parse_whole<int>("195") == 195);
    CHECK_FALSE(parse_whole<std::uint64_t>("18446744073709551616"));  // does not fit
    CHECK_FALSE(parse_whole<int>("2147483648"));
    for (const char* bad : {"", "-1", "+1", " 1", "1 ", "12a", "0x10", "1.5", "-"})
        CHECK_FALSE(parse_whole<int>(bad));
    CHECK_FALSE(parse_whole<std::uint64_t>("-1"));  // no wrap-around
}
