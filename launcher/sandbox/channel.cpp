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
    template <typename T>
    void pod(const T& v) {
        static_assert(std::is_trivially_copyable_v<T>);
        bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
};

struct In {
    std::string_view bytes;
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
// without an encoder, decode()'s switch (-Wswitch) names every tag. An encoder returns the fd
// that goes with the frame, or -1.
struct Header {
    std::uint64_t user_from, at, n;  // DevicePlan: where the late ops are in the full plan
};

int put(Out& o, const Go& g) {
    o.pod(g.bound);
    return -1;
}
int put(Out& o, const DevicePlan& p) {
    const rootfs::MountPlan& full = p.late.full;
    const std::size_t n = p.late.prepared.size(), at = full.user_from - std::min(full.user_from, n);
    std::vector<bool> flags(full.ops.size());
    for (std::size_t i = 0; i < n && at + i < flags.size(); ++i) flags[at + i] = p.late.prepared[i];
    o.pod(Header{full.user_from, at, n});
    o.bytes += rootfs::encode_ops(full.ops, flags);
    return -1;
}
int put(Out&, const RootView& v) { return v.root.get(); }
int put(Out& o, const LateDir& d) {
    o.pod(d.dir.valid());
    return d.dir.get();
}
int put(Out& o, const Failure& f) {
    o.pod(std::int32_t{f.code});
    o.bytes += f.text;
    return -1;
}
int put(Out& o, const Exited& e) {
    o.pod(std::int32_t{e.wait_status});
    o.pod(std::int64_t{e.max_rss_kb});
    return -1;
}
int put(Out& o, const Meter& m) {
    o.pod(m.what);
    return m.fd.get();
}
int put(Out&, const PtyMaster& p) { return p.master.get(); }
int put(Out&, const StepReady& r) { return r.holder.get(); }
int put(Out& o, const Joined& j) {
    o.pod(std::int32_t{j.pid});
    return j.pidfd.get();
}

void get(In& in, UniqueFd, Go& g) { g.bound = in.pod<bool>(); }
void get(In& in, UniqueFd, DevicePlan& p) {
    const Header h = in.pod<Header>();
    std::vector<bool> flags;
    p.late.full.ops = rootfs::decode_ops(in.rest(), &flags);
    if (h.user_from > flags.size() || h.at > flags.size() || h.n > flags.size() - h.at)
        In::bad("bad late range");
    p.late.full.user_from = h.user_from;
    p.late.prepared.assign(flags.begin() + static_cast<std::ptrdiff_t>(h.at),
                           flags.begin() + static_cast<std::ptrdiff_t>(h.at + h.n));
}
UniqueFd required(UniqueFd fd) {
    if (!fd.valid()) In::bad("the fd sent with it is missing");
    return fd;
}
void get(In&, UniqueFd fd, RootView& v) { v.root = required(std::move(fd)); }
void get(In& in, UniqueFd fd, LateDir& d) {
    if (in.pod<bool>() != fd.valid()) In::bad("the fd sent with it is missing");
    d.dir = std::move(fd);
}
void get(In& in, UniqueFd, Failure& f) {
    f.code = in.pod<std::int32_t>();
    f.text = in.rest();
}
void get(In& in, UniqueFd, Exited& e) {
    e.wait_status = in.pod<std::int32_t>();
    e.max_rss_kb = static_cast<long>(in.pod<std::int64_t>());
}
void get(In& in, UniqueFd fd, Meter& m) {
    m.what = in.pod<Meter::What>();
    if (m.what > Meter::sockets) In::bad("unknown meter");
    m.fd = required(std::move(fd));
}
void get(In&, UniqueFd fd, PtyMaster& p) { p.master = required(std::move(fd)); }
void get(In&, UniqueFd fd, StepReady& r) { r.holder = required(std::move(fd)); }
void get(In& in, UniqueFd fd, Joined& j) {
    j.pid = in.pod<std::int32_t>();
    j.pidfd = required(std::move(fd));
}

template <typename T>
Frame decoded(In& in, UniqueFd fd) {
    T frame;
    get(in, std::move(fd), frame);
    return frame;
}

Frame decode(In& in, UniqueFd fd) {
    switch (static_cast<Tag>(in.pod<std::uint8_t>())) {
        case Tag::go: return decoded<Go>(in, std::move(fd));
        case Tag::device_plan: return decoded<DevicePlan>(in, std::move(fd));
        case Tag::root_view: return decoded<RootView>(in, std::move(fd));
        case Tag::late_dir: return decoded<LateDir>(in, std::move(fd));
        case Tag::failure: return decoded<Failure>(in, std::move(fd));
        case Tag::exited: return decoded<Exited>(in, std::move(fd));
        case Tag::meter: return decoded<Meter>(in, std::move(fd));
        case Tag::pty_master: return decoded<PtyMaster>(in, std::move(fd));
        case Tag::step_ready: return decoded<StepReady>(in, std::move(fd));
        case Tag::joined: return decoded<Joined>(in, std::move(fd));
    }
    In::bad("unknown tag");
}

}  // namespace

void send(int sock, const Frame& frame) {
    Out o;
    o.pod(static_cast<std::uint8_t>(tag(frame)));
    const int fd = std::visit([&](const auto& f) { return put(o, f); }, frame);
    sys::send_frame(sock, o.bytes, fd, kWhat);
}

void send_quietly(int sock, const Frame& frame) noexcept {
    try {
        send(sock, frame);
    } catch (...) {}
}

int peek_tag(int sock) { return sys::peek_frame(sock, kWhat); }

std::optional<Frame> receive(int sock) {
    std::string bytes;
    UniqueFd fd;
    if (!sys::recv_frame(sock, bytes, fd, kWhat)) return std::nullopt;
    In in{bytes};
    Frame frame = decode(in, std::move(fd));
    if (!in.bytes.empty()) In::bad("trailing bytes");
    return frame;
}

}  // namespace gpubox::launcher::channel
