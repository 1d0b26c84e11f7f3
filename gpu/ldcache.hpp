#pragma once
// glibc's /etc/ld.so.cache: a bounds-checked parser (new format "glibc-ld.so.cache1.1", alone or
// embedded after an old "ld.so-1.7.0" table) and a writer of the new format. Pure.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpubox::gpu {

struct LdCacheEntry {
    std::int32_t flags = 0;  // type (0x00ff) | arch (0xff00): 0x0303 = x86-64 libc6
    std::string key;         // soname
    std::string value;       // path
    std::uint64_t hwcap = 0;
    bool operator==(const LdCacheEntry&) const = default;
};

struct LdCacheError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

constexpr std::int32_t kLdFlagElfLibc6 = 0x0003;
constexpr std::int32_t kLdFlagX8664 = 0x0300;
constexpr std::int32_t kLdFlagAarch64 = 0x0a00;
constexpr std::int32_t kLdFlagsNative =
#if defined(__aarch64__)
    kLdFlagElfLibc6 | kLdFlagAarch64;
#else
    kLdFlagElfLibc6 | kLdFlagX8664;
#endif

// Throws LdCacheError for anything malformed: bad magic, old-only format, big-endian flag,
// entry table or string offsets outside the file, strings without a terminating NUL.
std::vector<LdCacheEntry> parse_ldcache(std::string_view bytes);

// The entries whose key starts with one of `prefixes`, found the way glibc's loader finds a
// name: by binary search of the table, which ldconfig sorts (see render_ldcache). The cost grows
// with the number of prefixes and matches, not with the host's library count. Only the entries
// it reads are checked; a table that is not sorted yields fewer entries, never out-of-bounds
// reads. A prefix must not end in a digit (a digit run compares as a number). Throws
// LdCacheError for a malformed header or a malformed entry it reads.
std::vector<LdCacheEntry> find_ldcache(std::string_view bytes,
                                       const std::vector<std::string>& prefixes);

// `parse` (one of the two above) over a mapped cache (a rootfs::MappedFile): its entries, or
// none and why in `problem`: the parser's error, or the file shrank under the read.
template <typename Mapped, typename Parse>
std::vector<LdCacheEntry> parse_mapped_ldcache(const Mapped& file, Parse parse,
                                               std::string& problem) {
    std::vector<LdCacheEntry> out;
    try {
        out = parse(file.bytes());
    } catch (const LdCacheError& e) {
        problem = e.what();
    }
    if (file.truncated())
        out.clear(), problem = "it shrank while gpubox read it (rewritten in place?)";
    return out;
}

// Entries with this hwcap bit point into glibc-hwcaps subdirectories through an extension
// section the writer does not produce; callers drop them before rendering.
constexpr std::uint64_t kLdHwcapExtension = 1ULL << 62;

// The new format, entries sorted as glibc's loader binary-searches them.
std::string render_ldcache(std::vector<LdCacheEntry> entries);

// glibc's _dl_cache_libcmp: digit runs compare as numbers.
int ldcache_libcmp(std::string_view a, std::string_view b);

}  // namespace gpubox::gpu
