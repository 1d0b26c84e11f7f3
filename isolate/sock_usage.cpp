#include "isolate/sock_usage.hpp"

#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <cstdlib>
#include <set>

#include "common/error.hpp"
#include "common/sys.hpp"

namespace gpubox::isolate {
namespace {

template <typename T>
T load(const unsigned char* p) {  // netlink data is aligned to 4, not to T
    T v{};
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Walks one buffer of netlink messages; `each(payload, length)` for each message of the dump.
template <typename Each>
DumpState walk(const void* buf, std::size_t len, std::uint32_t seq, Each each) {
    const auto* p = static_cast<const unsigned char*>(buf);
    while (len >= sizeof(nlmsghdr)) {
        const auto h = load<nlmsghdr>(p);
        if (h.nlmsg_len < sizeof h || h.nlmsg_len > len) return DumpState::failed;
        if (h.nlmsg_seq == seq) {
            if (h.nlmsg_type == NLMSG_DONE) return DumpState::done;
            if (h.nlmsg_type == NLMSG_ERROR) return DumpState::failed;
            if (h.nlmsg_type == SOCK_DIAG_BY_FAMILY &&
                !each(p + NLMSG_HDRLEN,
                      h.nlmsg_len - std::min<std::size_t>(h.nlmsg_len, NLMSG_HDRLEN)))
                return DumpState::failed;
        }
        const std::size_t step = NLMSG_ALIGN(h.nlmsg_len);
        if (step >= len) break;
        p += step, len -= step;
    }
    return DumpState::more;
}

// The attributes after a fixed header of `fixed` bytes: `each(type, data, length)`.
template <typename Each>
bool attributes(const unsigned char* p, std::size_t len, std::size_t fixed, Each each) {
    if (len < fixed) return false;
    p += NLMSG_ALIGN(fixed), len -= std::min(len, static_cast<std::size_t>(NLMSG_ALIGN(fixed)));
    while (len >= sizeof(nlattr)) {
        const auto a = load<nlattr>(p);
        if (a.nla_len < sizeof a || a.nla_len > len) return false;
        each(a.nla_type & NLA_TYPE_MASK, p + NLA_HDRLEN, a.nla_len - NLA_HDRLEN);
        const std::size_t step = NLA_ALIGN(a.nla_len);
        if (step >= len) break;
        p += step, len -= step;
    }
    return true;
}

std::uint64_t meminfo(const unsigned char* p, std::size_t len, int which) {
    if (len < (static_cast<std::size_t>(which) + 1) * sizeof(std::uint32_t)) return 0;
    return load<std::uint32_t>(p + which * sizeof(std::uint32_t));
}

}  // namespace

DumpState parse_unix_dump(const void* buf, std::size_t len, std::uint32_t seq,
                          std::vector<UnixSock>& out) {
    return walk(buf, len, seq, [&](const unsigned char* p, std::size_t n) {
        if (n < sizeof(unix_diag_msg)) return false;
        const auto m = load<unix_diag_msg>(p);
        UnixSock s;
        s.ino = m.udiag_ino, s.type = m.udiag_type, s.state = m.udiag_state;
        const bool ok =
            attributes(p, n, sizeof m, [&](int type, const unsigned char* d, std::size_t l) {
                if (type == UNIX_DIAG_NAME) s.named = true;
                if (type == UNIX_DIAG_PEER && l >= 4) s.peer = load<std::uint32_t>(d);
                if (type == UNIX_DIAG_RQLEN && l >= sizeof(unix_diag_rqlen))
                    s.rqueue = load<unix_diag_rqlen>(d).udiag_rqueue;
                if (type == UNIX_DIAG_MEMINFO) s.wmem = meminfo(d, l, SK_MEMINFO_WMEM_ALLOC);
                if (type == UNIX_DIAG_ICONS)
                    for (std::size_t i = 0; i + 4 <= l; i += 4)
                        s.icons.push_back(load<std::uint32_t>(d + i));
            });
        out.push_back(std::move(s));
        return ok;
    });
}

DumpState parse_inet_dump(const void* buf, std::size_t len, std::uint32_t seq,
                          std::vector<InetSock>& out) {
    return walk(buf, len, seq, [&](const unsigned char* p, std::size_t n) {
        InetSock s;
        if (n >= sizeof(inet_diag_msg)) {
            inet_diag_msg m;
            std::memcpy(&m, p, sizeof m);
            s.ino = m.idiag_inode, s.state = m.idiag_state, s.sport = m.id.idiag_sport;
            std::memcpy(s.src.data(), m.id.idiag_src, sizeof m.id.idiag_src);
        }
        const bool ok = attributes(p, n, sizeof(inet_diag_msg),
                                   [&](int type, const unsigned char* d, std::size_t l) {
                                       if (type != INET_DIAG_SKMEMINFO) return;
                                       s.rmem = meminfo(d, l, SK_MEMINFO_RMEM_ALLOC);
                                       s.wmem = meminfo(d, l, SK_MEMINFO_WMEM_ALLOC);
                                       s.queued = meminfo(d, l, SK_MEMINFO_WMEM_QUEUED);
                                       s.backlog = meminfo(d, l, SK_MEMINFO_BACKLOG);
                                   });
        out.push_back(s);
        return ok;
    });
}

SockStat parse_sockstat(const std::string& sockstat, const std::string& sockstat6) {
    // The number after "KEY " on the line that starts with "PROTO: "; absent: none (~0).
    auto number = [](const std::string& text, const std::string& proto, const std::string& key) {
        const std::string line = proto + ": " + key + " ";
        const auto at = text.compare(0, line.size(), line) == 0 ? 0 : text.find("\n" + line);
        if (at == std::string::npos) return ~0ULL;
        return std::strtoull(text.c_str() + at + line.size() + (at ? 1 : 0), nullptr, 10);
    };
    return SockStat{number(sockstat, "sockets", "used"), number(sockstat, "TCP", "inuse") != 0,
                    number(sockstat, "UDP", "inuse") != 0, number(sockstat6, "TCP6", "inuse") != 0,
                    number(sockstat6, "UDP6", "inuse") != 0};
}

std::uint64_t unix_socket_bytes(const std::vector<UnixSock>& socks, const SockBounds& b,
                                const Inodes* only) {
    std::set<std::uint32_t> listed;
    for (const UnixSock& s : socks)
        if (s.ino) listed.insert(s.ino);
    // A peer that closed shows as 0 (its sock has no inode left), or as one no longer listed.
    auto gone = [&](std::uint32_t ino) { return ino == 0 || !listed.count(ino); };
    // What one sender can have queued: its buffer full, then one more write (a stream skb holds
    // at most 32 KiB in pages and a page's worth in its head; a datagram, up to the buffer).
    const std::uint64_t stream = b.sndbuf_max + kStreamSkb, dgram = 2 * b.sndbuf_max + 4096;
    std::uint64_t sum = 0;
    for (const UnixSock& s : socks) {
        if (only && !only->count(s.ino)) continue;
        sum += s.wmem;
        if (s.state == kListen) {
            for (std::uint32_t client : s.icons)
                if (gone(client)) sum += stream;
            continue;
        }
        const bool peer_gone = s.state == kEstablished && gone(s.peer);
        if (s.type == SOCK_STREAM && peer_gone && s.rqueue)
            sum += std::min<std::uint64_t>(stream, kPerByte * s.rqueue + kStreamSkb);
        else if (s.type != SOCK_STREAM && peer_gone) sum += dgram;
        if (s.type == SOCK_DGRAM && s.named) sum += (b.dgram_qlen + 1) * (b.sndbuf_max + 4096);
    }
    return sum;
}

std::uint64_t inet_socket_bytes(const std::vector<InetSock>& socks, const Inodes* only) {
    std::vector<const InetSock*> listeners;
    if (only)
        for (const InetSock& s : socks)
            if (s.state == kListen && only->count(s.ino)) listeners.push_back(&s);
    auto pending = [&](const InetSock& s) {  // a connection one of them has not accepted
        return s.ino == 0 && s.state != kListen &&
               std::any_of(listeners.begin(), listeners.end(), [&](const InetSock* l) {
                   return l->sport == s.sport &&
                          (l->src == s.src || l->src == std::array<std::uint32_t, 4>{});
               });
    };
    std::uint64_t sum = 0;
    for (const InetSock& s : socks)
        if (!only || only->count(s.ino) || pending(s))
            sum += s.rmem + std::max(s.wmem, s.queued) + s.backlog;
    return sum;
}

SocketMeter::SocketMeter(int diag, SockBounds bounds) : diag_(diag), bounds_(bounds) {
    const timeval second{1, 0};  // the kernel answers at once; never a monitor stuck in recv
    ::setsockopt(diag_, SOL_SOCKET, SO_RCVTIMEO, &second, sizeof second);
}

template <typename Sock>
void SocketMeter::dump(const void* req, std::size_t len, std::vector<Sock>& out) {
    struct {
        nlmsghdr h;
        unsigned char body[sizeof(inet_diag_req_v2)];
    } msg{};
    msg.h.nlmsg_len = static_cast<std::uint32_t>(NLMSG_LENGTH(len));
    msg.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    msg.h.nlmsg_seq = ++seq_;
    std::memcpy(msg.body, req, len);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(diag_, &msg, msg.h.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel),
                 sizeof kernel) < 0)
        return;
    buf_.resize(32768);
    for (;;) {
        const ssize_t n = ::recv(diag_, buf_.data(), buf_.size(), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        DumpState st;
        if constexpr (std::is_same_v<Sock, UnixSock>)
            st = parse_unix_dump(buf_.data(), static_cast<std::size_t>(n), seq_, out);
        else st = parse_inet_dump(buf_.data(), static_cast<std::size_t>(n), seq_, out);
        if (st != DumpState::more) return;
    }
}

std::uint64_t SocketMeter::unix_bytes(const Inodes* only) {
    std::vector<UnixSock> socks;
    unix_diag_req u{};
    u.sdiag_family = AF_UNIX;
    u.udiag_states = ~0U;
    u.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN | UDIAG_SHOW_MEMINFO |
                   UDIAG_SHOW_ICONS;
    dump(&u, sizeof u, socks);
    return unix_socket_bytes(socks, bounds_, only);
}

std::uint64_t SocketMeter::inet_bytes(const SockStat& stat, const Inodes* only) {
    const struct {
        std::uint8_t family, protocol;
        bool used;
    } inet[] = {{AF_INET, IPPROTO_TCP, stat.tcp4},
                {AF_INET, IPPROTO_UDP, stat.udp4},
                {AF_INET6, IPPROTO_TCP, stat.tcp6},
                {AF_INET6, IPPROTO_UDP, stat.udp6}};
    std::uint64_t sum = 0;
    for (const auto& [family, protocol, used] : inet) {
        if (!used) continue;
        inet_diag_req_v2 r{};
        r.sdiag_family = family;
        r.sdiag_protocol = protocol;
        r.idiag_ext = 1U << (INET_DIAG_SKMEMINFO - 1);
        r.idiag_states = ~0U;
        std::vector<InetSock> socks;
        dump(&r, sizeof r, socks);
        sum += inet_socket_bytes(socks, only);
    }
    return sum;
}

std::uint64_t SocketMeter::sample(const SockStat& stat, bool inet_too) {
    const std::uint64_t sum = stat.sockets > 1 ? unix_bytes(nullptr) : 0;
    if (inet_too) inet_bytes_ = inet_bytes(stat, nullptr);
    return sum + inet_bytes_;
}

std::uint64_t SocketMeter::sample_of(const Inodes& inodes) {
    if (inodes.empty()) return 0;
    return unix_bytes(&inodes) + inet_bytes(SockStat{}, &inodes);
}

SockBounds host_sock_bounds(bool shared_net) {
    // A number from a sysctl file; `dflt`, the kernel's default, where it cannot be read.
    auto sysctl = [](const char* path, std::uint64_t dflt) -> std::uint64_t {
        const int fd = sys::try_open_at(AT_FDCWD, path, O_RDONLY);
        if (fd < 0) return dflt;
        const UniqueFd own(fd);
        char text[32] = {};
        return ::read(fd, text, sizeof text - 1) > 0 ? std::strtoull(text, nullptr, 10) : dflt;
    };
    return SockBounds{2 * sysctl("/proc/sys/net/core/wmem_max", kSockBufMax),
                      shared_net ? sysctl("/proc/sys/net/unix/max_dgram_qlen", 10) : kDgramQlen};
}

UniqueFd open_net_meter(std::uint32_t dgram_qlen) {
    if (dgram_qlen) {
        const std::string path = "/proc/sys/net/unix/max_dgram_qlen";
        sys::write_all(sys::open_at(AT_FDCWD, path, O_WRONLY).get(), std::to_string(dgram_qlen),
                       path);
    }
    const int s = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (s < 0) throw SysError(errno, "socket(AF_NETLINK, NETLINK_SOCK_DIAG)");
    return UniqueFd(s);
}

}  // namespace gpubox::isolate
