#include "launcher/sandbox/channel.hpp"

#include <cstdint>
#include <cstring>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "rootfs/wire.hpp"

namespace gpubox::launcher::channel {
namespace {

constexpr const char* kWhat = "control channel";

struct Out {
    std::string bytes;
    std::vector<int> fds;  // sent beside the bytes, in order
    void fd(const UniqueFd& f) {
        if (f.valid()) fds.push_back(f.get());
    }
    template <typename T>
    void pod(const T& v) {
        static_assert(std::is_trivially_copyable_v<T>);
        bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
};

struct In {
    std::string_view bytes;
    std::vector<UniqueFd> fds;  // those that came beside the bytes, taken in order
    std::size_t next_fd = 0;
    UniqueFd fd() {
        if (next_fd == fds.size()) bad("the fd sent with it is missing");
        return std::move(fds[next_fd++]);
    }
    [[noreturn]] static void bad(const char* what) {
        throw SetupError(cat("control channel frame: ", what));
    }
    template <typename T>
    T pod() {
        static_assert(std::is_trivially_copyable_v<T>);
        T v;
        if (bytes.size() < sizeof v) bad("truncated");
        std::memcpy(&v, bytes.data(), sizeof v);
        bytes.remove_prefix(sizeof v);
        return v;
    }
    std::string_view rest() { return std::exchange(bytes, {}); }
};

// One encoder and one decoder per frame type: send()'s std::visit fails to compile for a type
// without an encoder, decode()'s switch (-Wswitch) names every tag. An encoder adds the fds that
// go with the frame (Out::fd), the decoder takes them in the same order (In::fd).
struct Header {
    std::uint64_t user_from, at, n;  // DevicePlan: where the late ops are in the full plan
};

void put(Out& o, const Go& g) { o.pod(g.bound); }
void put(Out& o, const DevicePlan& p) {
    const rootfs::MountPlan& full = p.late.full;
    const std::size_t n = p.late.prepared.size(), at = full.user_from - std::min(full.user_from, n);
    std::vector<bool> flags(full.ops.size());
    for (std::size_t i = 0; i < n && at + i < flags.size(); ++i) flags[at + i] = p.late.prepared[i];
    o.pod(Header{full.user_from, at, n});
    o.bytes += rootfs::encode_ops(full.ops, flags);
}
void put(Out& o, const RootView& v) { o.fd(v.root); }
void put(Out& o, const LateDir& d) {
    o.pod(d.dir.valid());
    o.fd(d.dir);
}
void put(Out& o, const Failure& f) {
    o.pod(std::int32_t{f.code});
    o.bytes += f.text;
}
void put(Out& o, const Exited& e) {
    o.pod(std::int32_t{e.wait_status});
    o.pod(std::int64_t{e.max_rss_kb});
    o.pod(e.alone);
}
void put(Out& o, const Meter& m) {
    o.pod(std::uint8_t(m.tmpfs.valid() | m.sockets.valid() << 1 | m.sockstat.valid() << 2 |
                       m.sockstat6.valid() << 3 | m.clock.valid() << 4));
    o.pod(std::int32_t{m.clock_error});
    o.fd(m.proc), o.fd(m.tmpfs), o.fd(m.sockets), o.fd(m.sockstat), o.fd(m.sockstat6);
    o.fd(m.clock);
}
void put(Out& o, const PtyMaster& p) { o.fd(p.master); }
void put(Out& o, const StepReady& r) { o.fd(r.holder); }
void put(Out& o, const Joined& j) {
    o.pod(std::int32_t{j.pid});
    o.fd(j.pidfd);
}

void get(In& in, Go& g) { g.bound = in.pod<bool>(); }
void get(In& in, DevicePlan& p) {
    const Header h = in.pod<Header>();
    std::vector<bool> flags;
    p.late.full.ops = rootfs::decode_ops(in.rest(), &flags);
    if (h.user_from > flags.size() || h.at > flags.size() || h.n > flags.size() - h.at)
        In::bad("bad late range");
    p.late.full.user_from = h.user_from;
    p.late.prepared.assign(flags.begin() + static_cast<std::ptrdiff_t>(h.at),
                           flags.begin() + static_cast<std::ptrdiff_t>(h.at + h.n));
}
void get(In& in, RootView& v) { v.root = in.fd(); }
void get(In& in, LateDir& d) {
    if (in.pod<bool>()) d.dir = in.fd();
}
void get(In& in, Failure& f) {
    f.code = in.pod<std::int32_t>();
    f.text = in.rest();
}
void get(In& in, Exited& e) {
    e.wait_status = in.pod<std::int32_t>();
    e.max_rss_kb = static_cast<long>(in.pod<std::int64_t>());
    e.alone = in.pod<bool>();
}
void get(In& in, Meter& m) {
    const auto has = in.pod<std::uint8_t>();
    if (has > 31) In::bad("unknown meter");
    m.clock_error = in.pod<std::int32_t>();
    m.proc = in.fd();
    if (has & 1) m.tmpfs = in.fd();
    if (has & 2) m.sockets = in.fd();
    if (has & 4) m.sockstat = in.fd();
    if (has & 8) m.sockstat6 = in.fd();
    if (has & 16) m.clock = in.fd();
}
void get(In& in, PtyMaster& p) { p.master = in.fd(); }
void get(In& in, StepReady& r) { r.holder = in.fd(); }
void get(In& in, Joined& j) {
    j.pid = in.pod<std::int32_t>();
    j.pidfd = in.fd();
}

template <typename T>
Frame decoded(In& in) {
    T frame;
    get(in, frame);
    return frame;
}

Frame decode(In& in) {
    switch (static_cast<Tag>(in.pod<std::uint8_t>())) {
        case Tag::go: return decoded<Go>(in);
        case Tag::device_plan: return decoded<DevicePlan>(in);
        case Tag::root_view: return decoded<RootView>(in);
        case Tag::late_dir: return decoded<LateDir>(in);
        case Tag::failure: return decoded<Failure>(in);
        case Tag::exited: return decoded<Exited>(in);
        case Tag::meter: return decoded<Meter>(in);
        case Tag::pty_master: return decoded<PtyMaster>(in);
        case Tag::step_ready: return decoded<StepReady>(in);
        case Tag::joined: return decoded<Joined>(in);
    }
    In::bad("unknown tag");
}

}  // namespace

void send(int sock, const Frame& frame) {
    Out o;
    o.pod(static_cast<std::uint8_t>(tag(frame)));
    std::visit([&](const auto& f) { put(o, f); }, frame);
    sys::send_frame(sock, o.bytes, o.fds, kWhat);
}

void send_quietly(int sock, const Frame& frame) noexcept {
    try {
        send(sock, frame);
    } catch (...) {}
}

int peek_tag(int sock) { return sys::peek_frame(sock, kWhat); }

std::optional<Frame> receive(int sock) {
    std::string bytes;
    std::vector<UniqueFd> fds;
    if (!sys::recv_frame(sock, bytes, fds, kWhat)) return std::nullopt;
    In in{bytes, std::move(fds)};
    Frame frame = decode(in);
    if (!in.bytes.empty()) In::bad("trailing bytes");
    if (in.next_fd != in.fds.size()) In::bad("more fds than it takes");
    return frame;
}

}  // namespace gpubox::launcher::channel
