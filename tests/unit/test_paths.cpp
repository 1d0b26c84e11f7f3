#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "rootfs/paths.hpp"

using namespace gpubox;
using namespace gpubox::rootfs;

TEST_CASE("normalize_container_path") {
    auto [in, out] = GENERATE(table<std::string, std::string>({
        {"/", "/"}, {"//a//b/", "/a/b"}, {"/a/./b", "/a/b"}, {"/.", "/"}, {"/a/b/.", "/a/b"}}));
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
