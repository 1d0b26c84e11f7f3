#include "gpu/ldcache.hpp"

#include <algorithm>
#include <cstring>

#include "common/text.hpp"

namespace gpubox::gpu {
namespace {

constexpr std::string_view kOldMagic = "ld.so-1.7.0";
constexpr std::string_view kNewMagic = "glibc-ld.so.cache";
constexpr std::string_view kNewVersion = "1.1";
constexpr std::size_t kOldHeader = 16, kOldEntry = 12, kNewHeader = 48, kNewEntry = 24;

template <typename T>
T read_at(std::string_view b, std::size_t off) {
    T v;
    std::memcpy(&v, b.data() + off, sizeof v);
    return v;
}

std::string string_at(std::string_view b, std::size_t base, std::uint32_t off, const char* what) {
    const std::size_t pos = base + off;
    if (off >= b.size() || pos >= b.size()) throw LdCacheError(cat(what, " offset ", off, " outside the file"));
    const void* nul = std::memchr(b.data() + pos, '\0', b.size() - pos);
    if (!nul) throw LdCacheError(cat(what, " at ", pos, " has no terminating NUL"));
    return std::string(b.data() + pos, static_cast<const char*>(nul));
}

std::vector<LdCacheEntry> parse_new(std::string_view b, std::size_t base) {
    if (b.size() < base + kNewHeader) throw LdCacheError("truncated header");
    if (b.substr(base, kNewMagic.size()) != kNewMagic || b.substr(base + 17, 3) != kNewVersion)
        throw LdCacheError("bad magic");
    const auto nlibs = read_at<std::uint32_t>(b, base + 20);
    const auto endian = read_at<std::uint8_t>(b, base + 28) & 3;
    if (endian != 0 && endian != 2) throw LdCacheError("not a little-endian cache");
    if (nlibs > (b.size() - base - kNewHeader) / kNewEntry) throw LdCacheError(cat("entry table (", nlibs, " entries) exceeds the file"));
    std::vector<LdCacheEntry> out;
    out.reserve(nlibs);
    for (std::uint32_t i = 0; i < nlibs; ++i) {
        const std::size_t e = base + kNewHeader + i * kNewEntry;
        LdCacheEntry entry;
        entry.flags = read_at<std::int32_t>(b, e);
        entry.key = string_at(b, base, read_at<std::uint32_t>(b, e + 4), "key");
        entry.value = string_at(b, base, read_at<std::uint32_t>(b, e + 8), "value");
        entry.hwcap = read_at<std::uint64_t>(b, e + 16);
        out.push_back(std::move(entry));
    }
    return out;
}

}  // namespace

std::vector<LdCacheEntry> parse_ldcache(std::string_view b) {
    if (b.substr(0, kNewMagic.size()) == kNewMagic) return parse_new(b, 0);
    if (b.substr(0, kOldMagic.size()) != kOldMagic) throw LdCacheError("unknown file format");
    if (b.size() < kOldHeader) throw LdCacheError("truncated header");
    const auto nlibs = read_at<std::uint32_t>(b, 12);
    if (nlibs > (b.size() - kOldHeader) / kOldEntry) throw LdCacheError("old entry table exceeds the file");
    const std::size_t base = (kOldHeader + nlibs * kOldEntry + 7) & ~std::size_t{7};
    if (b.size() < base + kNewMagic.size() || b.substr(base, kNewMagic.size()) != kNewMagic)
        throw LdCacheError("unsupported file format (old format only)");
    return parse_new(b, base);
}

int ldcache_libcmp(const std::string& a, const std::string& b) {
    const char* p1 = a.c_str();
    const char* p2 = b.c_str();
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    while (*p1 != '\0') {
        if (digit(*p1)) {
            if (!digit(*p2)) return 1;
            long v1 = 0, v2 = 0;
            while (digit(*p1)) v1 = v1 * 10 + (*p1++ - '0');
            while (digit(*p2)) v2 = v2 * 10 + (*p2++ - '0');
            if (v1 != v2) return v1 < v2 ? -1 : 1;
        } else if (digit(*p2)) {
            return -1;
        } else if (*p1 != *p2) {
            return static_cast<unsigned char>(*p1) - static_cast<unsigned char>(*p2);
        } else {
            ++p1, ++p2;
        }
    }
    return static_cast<unsigned char>(*p1) - static_cast<unsigned char>(*p2);
}

std::string render_ldcache(std::vector<LdCacheEntry> entries) {
    // ldconfig's order: keys descending by libcmp, then flags descending, hwcap descending; the
    // loader's binary search relies on it.
    std::stable_sort(entries.begin(), entries.end(), [](const LdCacheEntry& x, const LdCacheEntry& y) {
        int c = ldcache_libcmp(y.key, x.key);
        if (c != 0) return c < 0;
        if (x.flags != y.flags) return x.flags > y.flags;
        return x.hwcap > y.hwcap;
    });
    std::string strings;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> offs;
    const std::size_t str_base = kNewHeader + entries.size() * kNewEntry;
    for (const LdCacheEntry& e : entries) {
        const auto k = static_cast<std::uint32_t>(str_base + strings.size());
        strings += e.key + '\0';
        const auto v = static_cast<std::uint32_t>(str_base + strings.size());
        strings += e.value + '\0';
        offs.emplace_back(k, v);
    }
    std::string out(kNewHeader, '\0');
    std::memcpy(out.data(), kNewMagic.data(), kNewMagic.size());
    std::memcpy(out.data() + 17, kNewVersion.data(), kNewVersion.size());
    const auto n = static_cast<std::uint32_t>(entries.size());
    const auto len = static_cast<std::uint32_t>(strings.size());
    std::memcpy(out.data() + 20, &n, 4);
    std::memcpy(out.data() + 24, &len, 4);
    out[28] = 2;  // little endian
    for (std::size_t i = 0; i < entries.size(); ++i) {
        char rec[kNewEntry] = {};
        const std::uint64_t hwcap = entries[i].hwcap;
        std::memcpy(rec, &entries[i].flags, 4);
        std::memcpy(rec + 4, &offs[i].first, 4);
        std::memcpy(rec + 8, &offs[i].second, 4);
        std::memcpy(rec + 16, &hwcap, 8);
        out.append(rec, kNewEntry);
    }
    return out + strings;
}

}  // namespace gpubox::gpu
