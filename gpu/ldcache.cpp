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

std::string_view string_at(std::string_view b, std::size_t base, std::uint32_t off,
                           const char* what) {
    const std::size_t pos = base + off;
    if (off >= b.size() || pos >= b.size())
        throw LdCacheError(cat(what, " offset ", off, " outside the file"));
    const void* nul = std::memchr(b.data() + pos, '\0', b.size() - pos);
    if (!nul) throw LdCacheError(cat(what, " at ", pos, " has no terminating NUL"));
    return std::string_view(
        b.data() + pos, static_cast<std::size_t>(static_cast<const char*>(nul) - (b.data() + pos)));
}

// The new-format table, header checked: entry i's record starts at base + kNewHeader + 24 i.
struct Table {
    std::string_view b;
    std::size_t base = 0;
    std::uint32_t nlibs = 0;

    std::size_t record(std::uint32_t i) const {
        return base + kNewHeader + std::size_t{i} * kNewEntry;
    }
    std::string_view key(std::uint32_t i) const {
        return string_at(b, base, read_at<std::uint32_t>(b, record(i) + 4), "key");
    }
    LdCacheEntry entry(std::uint32_t i) const {
        const std::size_t e = record(i);
        return {read_at<std::int32_t>(b, e), std::string(key(i)),
                std::string(string_at(b, base, read_at<std::uint32_t>(b, e + 8), "value")),
                read_at<std::uint64_t>(b, e + 16)};
    }
};

Table table_at(std::string_view b, std::size_t base) {
    if (b.size() < base + kNewHeader) throw LdCacheError("truncated header");
    if (b.substr(base, kNewMagic.size()) != kNewMagic || b.substr(base + 17, 3) != kNewVersion)
        throw LdCacheError("bad magic");
    const auto nlibs = read_at<std::uint32_t>(b, base + 20);
    const auto endian = read_at<std::uint8_t>(b, base + 28) & 3;
    if (endian != 0 && endian != 2) throw LdCacheError("not a little-endian cache");
    if (nlibs > (b.size() - base - kNewHeader) / kNewEntry)
        throw LdCacheError(cat("entry table (", nlibs, " entries) exceeds the file"));
    return {b, base, nlibs};
}

Table find_table(std::string_view b) {
    if (b.substr(0, kNewMagic.size()) == kNewMagic) return table_at(b, 0);
    if (b.substr(0, kOldMagic.size()) != kOldMagic) throw LdCacheError("unknown file format");
    if (b.size() < kOldHeader) throw LdCacheError("truncated header");
    const auto nlibs = read_at<std::uint32_t>(b, 12);
    if (nlibs > (b.size() - kOldHeader) / kOldEntry)
        throw LdCacheError("old entry table exceeds the file");
    const std::size_t base = (kOldHeader + nlibs * kOldEntry + 7) & ~std::size_t{7};
    if (b.size() < base + kNewMagic.size() || b.substr(base, kNewMagic.size()) != kNewMagic)
        throw LdCacheError("unsupported file format (old format only)");
    return table_at(b, base);
}

}  // namespace

std::vector<LdCacheEntry> parse_ldcache(std::string_view b) {
    const Table t = find_table(b);
    std::vector<LdCacheEntry> out;
    out.reserve(t.nlibs);
    for (std::uint32_t i = 0; i < t.nlibs; ++i) out.push_back(t.entry(i));
    return out;
}

std::vector<LdCacheEntry> find_ldcache(std::string_view b,
                                       const std::vector<std::string>& prefixes) {
    const Table t = find_table(b);
    std::vector<std::uint32_t> hits;
    for (const std::string& prefix : prefixes) {
        // Keys run from greatest to least. Every key that starts with the prefix is greater than
        // it and less than any other key greater than it: they sit just before the first key
        // less than the prefix.
        std::uint32_t lo = 0, hi = t.nlibs;
        while (lo < hi) {
            const std::uint32_t mid = lo + (hi - lo) / 2;
            if (ldcache_libcmp(t.key(mid), prefix) < 0) hi = mid;
            else lo = mid + 1;
        }
        for (std::uint32_t i = lo; i-- > 0 && t.key(i).substr(0, prefix.size()) == prefix;)
            hits.push_back(i);
    }
    // In table order, each once: what filtering parse_ldcache()'s result would give.
    std::sort(hits.begin(), hits.end());
    hits.erase(std::unique(hits.begin(), hits.end()), hits.end());
    std::vector<LdCacheEntry> out;
    for (std::uint32_t i : hits) out.push_back(t.entry(i));
    return out;
}

int ldcache_libcmp(std::string_view a, std::string_view b) {
    // glibc compares NUL-terminated strings: the end of a view reads as NUL.
    std::size_t i = 0, j = 0;
    auto at = [](std::string_view s, std::size_t k) { return k < s.size() ? s[k] : '\0'; };
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    while (at(a, i) != '\0') {
        if (digit(at(a, i))) {
            if (!digit(at(b, j))) return 1;
            unsigned long long v1 = 0, v2 = 0;
            while (digit(at(a, i))) v1 = v1 * 10 + static_cast<unsigned>(a[i++] - '0');
            while (digit(at(b, j))) v2 = v2 * 10 + static_cast<unsigned>(b[j++] - '0');
            if (v1 != v2) return v1 < v2 ? -1 : 1;
        } else if (digit(at(b, j))) {
            return -1;
        } else if (at(a, i) != at(b, j)) {
            return static_cast<unsigned char>(at(a, i)) - static_cast<unsigned char>(at(b, j));
        } else {
            ++i, ++j;
        }
    }
    return -static_cast<unsigned char>(at(b, j));
}

std::string render_ldcache(std::vector<LdCacheEntry> entries) {
    // ldconfig's order: keys descending by libcmp, then flags descending, hwcap descending; the
    // loader's binary search relies on it.
    std::stable_sort(entries.begin(), entries.end(),
                     [](const LdCacheEntry& x, const LdCacheEntry& y) {
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
