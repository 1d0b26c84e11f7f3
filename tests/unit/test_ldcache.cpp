#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

#include "gpu/driver_files.hpp"
#include "gpu/ldcache.hpp"

using namespace gpubox::gpu;

namespace {
std::vector<LdCacheEntry> sample() {
    return {{0x0303, "libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.14", 0},
            {0x0303, "libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", 0},
            {0x0003, "libc.so.6", "/lib32/libc.so.6", 0},
            {0x0303, "libfoo.so.10", "/x/libfoo.so.10", 0},
            {0x0303, "libfoo.so.9", "/x/libfoo.so.9", 0}};
}
template <typename T>
void put(std::string& s, std::size_t off, T v) {
    std::memcpy(s.data() + off, &v, sizeof v);
}
}  // namespace

TEST_CASE("ld.so.cache: what we render parses back, in glibc's order") {
    std::string bytes = render_ldcache(sample());
    auto entries = parse_ldcache(bytes);
    REQUIRE(entries.size() == 5);
    for (std::size_t i = 1; i < entries.size(); ++i)
        CHECK(ldcache_libcmp(entries[i - 1].key, entries[i].key) >= 0);  // descending keys
    CHECK(entries[0].key == "libfoo.so.10");                             // 10 > 9 numerically
    CHECK(entries[1].key == "libfoo.so.9");
    auto libc =
        std::find_if(entries.begin(), entries.end(), [](auto& e) { return e.key == "libc.so.6"; });
    CHECK(libc->flags == 0x0303);  // higher flags first among equal keys
}

TEST_CASE("libcmp compares digit runs as numbers") {
    CHECK(ldcache_libcmp("libfoo.so.10", "libfoo.so.9") > 0);
    CHECK(ldcache_libcmp("libfoo.so.1", "libfoo.so.1") == 0);
    CHECK(ldcache_libcmp("liba.so", "libb.so") < 0);
    CHECK(ldcache_libcmp("libx1", "libxa") > 0);  // a digit sorts after a letter
}

TEST_CASE("ld.so.cache: the system's own cache (written by its ldconfig) parses") {
    std::ifstream f("/etc/ld.so.cache", std::ios::binary);
    REQUIRE(f);
    std::stringstream s;
    s << f.rdbuf();
    auto entries = parse_ldcache(s.str());
    CHECK(entries.size() > 10);
    CHECK(std::any_of(entries.begin(), entries.end(), [](auto& e) {
        return e.key == "libc.so.6" && (e.flags & 0xffff) == kLdFlagsNative;
    }));
}

TEST_CASE("ld.so.cache: compat format (old table, then the new one at an 8-byte boundary)") {
    std::string newpart = render_ldcache(sample());
    const std::uint32_t nold = 3;
    std::string old(16 + nold * 12, '\0');
    std::memcpy(old.data(), "ld.so-1.7.0", 11);
    put(old, 12, nold);
    while (old.size() % 8) old += '\0';
    auto entries = parse_ldcache(old + newpart);
    CHECK(entries.size() == 5);
    CHECK_THROWS_WITH(parse_ldcache(old + std::string(64, 'x')),
                      Catch::Matchers::Contains("old format only"));
}

TEST_CASE("ld.so.cache: every truncation is an error, never a crash") {
    std::string bytes = render_ldcache(sample());
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        INFO("length " << n);
        CHECK_THROWS_AS(parse_ldcache(bytes.substr(0, n)), LdCacheError);
    }
}

TEST_CASE("ld.so.cache: corrupt fields are rejected") {
    std::string bytes = render_ldcache(sample());
    SECTION("entry count beyond the file") {
        put<std::uint32_t>(bytes, 20, 0x10000000);
        CHECK_THROWS_WITH(parse_ldcache(bytes), Catch::Matchers::Contains("exceeds the file"));
    }
    SECTION("key offset outside the file") {
        put<std::uint32_t>(bytes, 48 + 4, 0xfffffff0);
        CHECK_THROWS_WITH(parse_ldcache(bytes), Catch::Matchers::Contains("outside the file"));
    }
    SECTION("string without NUL") {
        bytes.back() = 'x';
        CHECK_THROWS_WITH(parse_ldcache(bytes), Catch::Matchers::Contains("terminating NUL"));
    }
    SECTION("big-endian flag") {
        bytes[28] = 3;
        CHECK_THROWS_WITH(parse_ldcache(bytes), Catch::Matchers::Contains("little-endian"));
    }
    SECTION("bad magic") {
        bytes[0] = 'G';
        CHECK_THROWS_AS(parse_ldcache(bytes), LdCacheError);
    }
}

namespace {
std::vector<LdCacheEntry> filtered(const std::vector<LdCacheEntry>& all,
                                   const std::vector<std::string>& prefixes) {
    std::vector<LdCacheEntry> out;
    for (const LdCacheEntry& e : all)
        if (std::any_of(prefixes.begin(), prefixes.end(),
                        [&](auto& p) { return e.key.rfind(p, 0) == 0; }))
            out.push_back(e);
    return out;
}
}  // namespace

TEST_CASE("ld.so.cache lookup: the binary search finds what a full scan finds, in table order") {
    std::vector<LdCacheEntry> entries = sample();
    for (const char* k :
         {"libcuda.so", "libcudadebugger.so.1", "libnvidia-ml.so.1", "libnvidia-ml.so",
          "libnvidia-pkcs11.so.1", "libnvidia-pkcs11-openssl3.so.1", "libnvidia-nvvm.so.4",
          "libnvidia-nvvm.so.10", "libnvidia-ml.so.1", "libz.so.1", "libA.so", "lib9.so",
          "libnvidia-mlx.so.2"})
        entries.push_back({0x0303, k, std::string("/usr/lib/") + k, 0});
    const std::string bytes = render_ldcache(entries);
    const auto all = parse_ldcache(bytes);
    for (const std::vector<std::string>& prefixes : std::vector<std::vector<std::string>>{
             {"libcuda.so"},
             {"libnvidia-ml.so"},
             {"libnvidia-pkcs11.so"},
             {"libnvidia-pkcs11-openssl3.so"},
             {"libnvidia-nvvm.so"},
             {"libcuda.so", "libnvidia-ml.so", "libnvidia-nvvm.so", "libc.so"},
             {"lib"},
             {"libzz.so"},
             {"aaa"},
             {"zzz"},
             {}}) {
        INFO("prefixes: " << prefixes.size() << (prefixes.empty() ? "" : " first " + prefixes[0]));
        CHECK(find_ldcache(bytes, prefixes) == filtered(all, prefixes));
    }
    CHECK(find_ldcache(bytes, {"libnvidia-ml.so"}).size() ==
          3);  // both libnvidia-ml.so.1 entries, not -mlx
    CHECK(find_ldcache(bytes, {"libcuda.so", "libcuda.so"}).size() == 2);  // each entry once
}

TEST_CASE("ld.so.cache lookup: the system's cache, sorted by its own ldconfig") {
    std::ifstream f("/etc/ld.so.cache", std::ios::binary);
    REQUIRE(f);
    std::stringstream s;
    s << f.rdbuf();
    const auto all = parse_ldcache(s.str());
    std::vector<std::string> prefixes;
    for (const LdCacheEntry& e : all)  // every library's name up to ".so": each is found
        if (auto so = e.key.find(".so"); so != std::string::npos)
            prefixes.push_back(e.key.substr(0, so + 3));
    REQUIRE(prefixes.size() > 10);
    CHECK(find_ldcache(s.str(), prefixes) == filtered(all, prefixes));
}

TEST_CASE(
    "ld.so.cache lookup: an unsorted table gives fewer entries, never wrong ones, and bad input "
    "throws") {
    std::string bytes = render_ldcache(sample());
    // Swap the first and last records: the table is no longer sorted.
    const std::size_t first = 48, last = 48 + 4 * 24;
    std::string a = bytes.substr(first, 24), b = bytes.substr(last, 24);
    bytes.replace(first, 24, b), bytes.replace(last, 24, a);
    const auto all = parse_ldcache(bytes);
    for (const std::string p : {"libfoo.so", "libc.so", "libcuda.so", "lib"}) {
        const auto want = filtered(all, {p});
        for (const LdCacheEntry& e : find_ldcache(bytes, {p}))
            CHECK(std::find(want.begin(), want.end(), e) != want.end());
    }
    CHECK_THROWS_AS(find_ldcache("not a cache at all", {"libc.so"}), LdCacheError);
    CHECK_THROWS_AS(find_ldcache(bytes.substr(0, 60), {"libc.so"}), LdCacheError);
}

TEST_CASE("ld.so.cache lookup: every driver prefix meets the binary search's precondition") {
    for (const std::string& p : library_prefixes(kCapAll)) {
        INFO(p);
        CHECK(p.size() > 3);
        CHECK(p.compare(p.size() - 3, 3, ".so") == 0);  // ends in a letter, never a digit run
    }
}
