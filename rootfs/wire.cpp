#include "rootfs/wire.hpp"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/error.hpp"
#include "common/text.hpp"

namespace gpubox::rootfs {
namespace {

// Each op's fields, in one list per op type that both directions walk (O may be const, for
// encoding). One overload per type, no fallback: an op type without one is a compile error
// (kEveryOpHasFields below), never an op whose fields are silently dropped.
template <typename O, typename F>
requires std::is_same_v<std::remove_const_t<O>, Bind>
void fields(O& o, F&& f) {
    f(o.source), f(o.target), f(o.read_only), f(o.need), f(o.place), f(o.kind);
}
template <typename O, typename F>
requires std::is_same_v<std::remove_const_t<O>, BindDev>
void fields(O& o, F&& f) { f(o.source), f(o.target), f(o.need), f(o.rdev), f(o.place); }
template <typename O, typename F>
requires std::is_same_v<std::remove_const_t<O>, Proc>
void fields(O& o, F&& f) { f(o.target); }
template <typename O, typename F>
requires std::is_same_v<std::remove_const_t<O>, Sysfs>
void fields(O& o, F&& f) { f(o.target), f(o.fresh); }
template <typename O, typename F>
requires std::is_same_v<std::remove_const_t<O>, Tmpfs>
void fields(O& o, F&& f) {
    f(o.target), f(o.mode), f(o.noexec), f(o.read_only), f(o.place), f(o.size);
}
template <typename O, typename F>
requires std::is_same_v<std::remove_const_t<O>, Devpts>
void fields(O& o, F&& f) { f(o.target); }
template <typename O, typename F>
requires std::is_same_v<std::remove_const_t<O>, Symlink>
void fields(O& o, F&& f) { f(o.link_text), f(o.path), f(o.place); }
template <typename O, typename F>
requires std::is_same_v<std::remove_const_t<O>, MaskPath>
void fields(O& o, F&& f) { f(o.target); }
template <typename O, typename F>
requires std::is_same_v<std::remove_const_t<O>, RemountRo>
void fields(O& o, F&& f) { f(o.target); }
template <typename O, typename F>
requires std::is_same_v<std::remove_const_t<O>, WriteFile>
void fields(O& o, F&& f) { f(o.target), f(o.content), f(o.mode), f(o.place); }
template <typename O, typename F>
requires std::is_same_v<std::remove_const_t<O>, MakeDir>
void fields(O& o, F&& f) { f(o.target), f(o.mode), f(o.place); }

struct AnyField {
    template <typename T>
    void operator()(T&) const {}
};
template <typename T>
concept HasFields = requires(T& op) {
    fields(op, AnyField{});
};
template <typename V>
struct EveryOpHasFields;
template <typename... Ops>
struct EveryOpHasFields<std::variant<Ops...>> : std::bool_constant<(HasFields<Ops> && ...)> {};
static_assert(EveryOpHasFields<MountOp>::value,
              "a MountOp type has no fields() list in rootfs/wire.cpp");

template <typename E>
constexpr std::uint64_t kLast = 0;
template <>
constexpr std::uint64_t kLast<Need> = static_cast<std::uint64_t>(Need::optional);
template <>
constexpr std::uint64_t kLast<Place> = static_cast<std::uint64_t>(Place::kernel);
template <>
constexpr std::uint64_t kLast<SourceKind> = static_cast<std::uint64_t>(SourceKind::file);

struct Writer {
    std::string out;
    void u64(std::uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
    void operator()(const std::string& s) { u64(s.size()), out += s; }
    void operator()(const std::optional<dev_t>& v) { u64(v.has_value()), u64(v.value_or(0)); }
    template <typename T>
    void operator()(const T& v) {
        static_assert(std::is_integral_v<T> || std::is_enum_v<T>);
        u64(static_cast<std::uint64_t>(v));
    }
};

struct Reader {
    std::string_view in;
    [[noreturn]] static void bad(const char* what) {
        throw SetupError(cat("device mount plan from the monitor: ", what));
    }
    std::uint64_t u64() {
        std::uint64_t v;
        if (in.size() < sizeof v) bad("truncated");
        std::memcpy(&v, in.data(), sizeof v);
        in.remove_prefix(sizeof v);
        return v;
    }
    void operator()(std::string& s) {
        const std::uint64_t n = u64();
        if (n > in.size()) bad("truncated string");
        s.assign(in.substr(0, n));
        in.remove_prefix(n);
    }
    void operator()(std::optional<dev_t>& v) {
        const bool has = u64() != 0;
        const std::uint64_t d = u64();
        v = has ? std::optional<dev_t>(static_cast<dev_t>(d)) : std::nullopt;
    }
    template <typename T>
    void operator()(T& v) {
        const std::uint64_t x = u64();
        if constexpr (std::is_same_v<T, bool>) {
            if (x > 1) bad("bad flag");
            v = x != 0;
        } else if constexpr (std::is_enum_v<T>) {
            static_assert(kLast<T> > 0, "every enum field needs its last enumerator here");
            if (x > kLast<T>) bad("bad enumerator");
            v = static_cast<T>(x);
        } else {
            v = static_cast<T>(x);
            if (static_cast<std::uint64_t>(v) != x) bad("number out of range");
        }
    }
};

template <std::size_t I = 0>
MountOp make_op(std::size_t index) {
    if constexpr (I < std::variant_size_v<MountOp>) {
        if (index == I) return MountOp(std::in_place_index<I>);
        return make_op<I + 1>(index);
    } else {
        Reader::bad("unknown op");
    }
}

}  // namespace

std::string encode_ops(std::span<const MountOp> ops, const std::vector<bool>& prepared) {
    Writer w;
    w.u64(ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
        w.u64(ops[i].index());
        std::visit([&](const auto& o) { fields(o, w); }, ops[i]);
        w(i < prepared.size() && prepared[i]);
    }
    return std::move(w.out);
}

std::vector<MountOp> decode_ops(std::string_view bytes, std::vector<bool>* prepared) {
    Reader r{bytes};
    const std::uint64_t n = r.u64();
    if (n > bytes.size() / 8) Reader::bad("bad count");
    std::vector<MountOp> ops;
    ops.reserve(n);
    if (prepared) prepared->clear();
    for (std::uint64_t i = 0; i < n; ++i) {
        MountOp op = make_op(r.u64());
        std::visit([&](auto& o) { fields(o, r); }, op);
        ops.push_back(std::move(op));
        bool done = false;
        r(done);
        if (prepared) prepared->push_back(done);
    }
    if (!r.in.empty()) Reader::bad("trailing bytes");
    return ops;
}

}  // namespace gpubox::rootfs
