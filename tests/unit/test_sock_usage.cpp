#include <catch2/catch.hpp>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "common/sys.hpp"
#include "isolate/sock_usage.hpp"
#include "tests/unit/in_child.hpp"

using namespace gpubox;
using namespace gpubox::isolate;

namespace {

// A netlink reply, built as the kernel lays it out.
struct Reply {
    std::vector<unsigned char> bytes;
    std::size_t at = 0;  // the message being built
    void begin(std::uint16_t type, std::uint32_t seq) {
        at = bytes.size();
        nlmsghdr h{};
        h.nlmsg_type = type;
        h.nlmsg_seq = seq;
        put(&h, sizeof h);
    }
    void put(const void* p, std::size_t n) {
        const auto* c = static_cast<const unsigned char*>(p);
        bytes.insert(bytes.end(), c, c + n);
        bytes.resize(NLMSG_ALIGN(bytes.size()));
    }
    void attr(std::uint16_t type, const void* p, std::size_t n) {
        nlattr a{};
        a.nla_type = type;
        a.nla_len = static_cast<std::uint16_t>(NLA_HDRLEN + n);
        bytes.insert(bytes.end(), reinterpret_cast<unsigned char*>(&a),
                     reinterpret_cast<unsigned char*>(&a) + sizeof a);
        put(p, n);
    }
    void end() {
        const auto len = static_cast<std::uint32_t>(bytes.size() - at);
        std::memcpy(bytes.data() + at, &len, sizeof len);  // nlmsg_len comes first
    }
    void unix_sock(std::uint32_t seq, std::uint32_t ino, std::uint8_t type, std::uint8_t state,
                   std::uint32_t peer, std::uint32_t rqueue, std::uint32_t wmem,
                   bool named = false) {
        begin(SOCK_DIAG_BY_FAMILY, seq);
        unix_diag_msg m{};
        m.udiag_family = AF_UNIX, m.udiag_type = type, m.udiag_state = state, m.udiag_ino = ino;
        put(&m, sizeof m);
        if (named) attr(UNIX_DIAG_NAME, "\0n", 2);
        attr(UNIX_DIAG_PEER, &peer, sizeof peer);
        unix_diag_rqlen rq{rqueue, 0};
        attr(UNIX_DIAG_RQLEN, &rq, sizeof rq);
        std::uint32_t mem[SK_MEMINFO_VARS] = {};
        mem[SK_MEMINFO_WMEM_ALLOC] = wmem;
        attr(UNIX_DIAG_MEMINFO, mem, sizeof mem);
        end();
    }
    void done(std::uint32_t seq) {
        begin(NLMSG_DONE, seq);
        const int zero = 0;
        put(&zero, sizeof zero);
        end();
    }
};

UnixSock sock(std::uint32_t ino, int type, std::uint8_t state, std::uint32_t peer,
              std::uint32_t rqueue = 0, std::uint64_t wmem = 0, bool named = false) {
    UnixSock s;
    s.ino = ino, s.type = static_cast<std::uint8_t>(type), s.state = state, s.peer = peer;
    s.rqueue = rqueue, s.wmem = wmem, s.named = named;
    return s;
}

}  // namespace

TEST_CASE("sock_diag replies: unix sockets and their attributes, parsed") {
    Reply r;
    r.unix_sock(7, 100, SOCK_STREAM, kEstablished, 101, 5, 0);
    r.unix_sock(6, 999, SOCK_STREAM, kEstablished, 0, 0, 0);  // a stale dump's: skipped
    r.unix_sock(7, 101, SOCK_DGRAM, 7, 0, 0, 4096, true);
    std::vector<UnixSock> out;
    CHECK(parse_unix_dump(r.bytes.data(), r.bytes.size(), 7, out) == DumpState::more);
    REQUIRE(out.size() == 2);
    CHECK(out[0].ino == 100);
    CHECK(out[0].peer == 101);
    CHECK(out[0].rqueue == 5);
    CHECK(out[0].type == SOCK_STREAM);
    CHECK_FALSE(out[0].named);
    CHECK(out[1].wmem == 4096);
    CHECK(out[1].named);
    r.done(7);
    out.clear();
    CHECK(parse_unix_dump(r.bytes.data(), r.bytes.size(), 7, out) == DumpState::done);

    Reply bad;  // an error, and a message longer than the buffer
    bad.begin(NLMSG_ERROR, 3);
    const int err = -EACCES;
    bad.put(&err, sizeof err);
    bad.end();
    CHECK(parse_unix_dump(bad.bytes.data(), bad.bytes.size(), 3, out) == DumpState::failed);
    Reply cut;
    cut.unix_sock(1, 5, SOCK_STREAM, kEstablished, 0, 0, 0);
    CHECK(parse_unix_dump(cut.bytes.data(), cut.bytes.size() - 8, 1, out) == DumpState::failed);
}

TEST_CASE("sock_diag replies: TCP and UDP buffers from INET_DIAG_SKMEMINFO") {
    Reply r;
    r.begin(SOCK_DIAG_BY_FAMILY, 2);
    inet_diag_msg m{};
    m.idiag_family = AF_INET;
    m.idiag_inode = 4242, m.idiag_state = kListen, m.id.idiag_sport = htons(8080);
    m.id.idiag_src[0] = htonl(INADDR_LOOPBACK);
    r.put(&m, sizeof m);
    std::uint32_t mem[SK_MEMINFO_VARS] = {};
    mem[SK_MEMINFO_RMEM_ALLOC] = 1000, mem[SK_MEMINFO_WMEM_ALLOC] = 300;
    mem[SK_MEMINFO_WMEM_QUEUED] = 5000, mem[SK_MEMINFO_BACKLOG] = 7;
    r.attr(INET_DIAG_SKMEMINFO, mem, sizeof mem);
    r.end();
    r.done(2);
    std::vector<InetSock> out;
    CHECK(parse_inet_dump(r.bytes.data(), r.bytes.size(), 2, out) == DumpState::done);
    REQUIRE(out.size() == 1);
    CHECK(inet_socket_bytes(out) == 1000 + 5000 + 7);
    CHECK(out[0].ino == 4242);
    CHECK(out[0].state == kListen);
    CHECK(out[0].sport == htons(8080));
    CHECK(out[0].src[0] == htonl(INADDR_LOOPBACK));
}

TEST_CASE("a step's task's sockets among the host's: its own, and its listeners' pending ones") {
    // unix: the charge follows the socket it belongs to; a peer's being gone is read from all.
    const SockBounds b{400000, 1};
    const std::vector<UnixSock> pair = {sock(1, SOCK_STREAM, kEstablished, 2, 0, 9000),
                                        sock(2, SOCK_STREAM, kEstablished, 1, 8000, 0)};
    const Inodes writer{1}, reader{2}, none{};
    CHECK(unix_socket_bytes(pair, b, &writer) == 9000);
    CHECK(unix_socket_bytes(pair, b, &reader) == 0);  // its writer is listed: the writer's
    CHECK(unix_socket_bytes(pair, b, &none) == 0);
    // The writer closed: the reader that is the task's holds the bound.
    CHECK(unix_socket_bytes({pair[1], sock(5, SOCK_STREAM, kEstablished, 0, 0, 70)}, b, &reader) ==
          b.sndbuf_max + kStreamSkb);
    // TCP: the task's sockets, and the connections its listener has not accepted (inode 0, its
    // port; on its address, or any address where it listens on all).
    auto tcp = [](std::uint32_t ino, std::uint8_t state, std::uint16_t port, std::uint32_t addr,
                  std::uint64_t rmem) {
        InetSock s;
        s.ino = ino, s.state = state, s.sport = port, s.src[0] = addr, s.rmem = rmem;
        return s;
    };
    const std::uint32_t lo = htonl(INADDR_LOOPBACK);
    const std::vector<InetSock> socks = {
        tcp(10, kListen, 80, lo, 0),          // the task's listener
        tcp(0, kEstablished, 80, lo, 1000),   // not accepted yet: the task's
        tcp(11, kEstablished, 80, lo, 50),    // accepted, by the host (a file holds it)
        tcp(0, kEstablished, 81, lo, 7000),   // another port's
        tcp(12, kEstablished, 5000, lo, 30),  // the task's client
        tcp(13, kListen, 90, 0, 0),           // the task's, on every address
        tcp(0, kEstablished, 90, lo, 200)};
    const Inodes task{10, 12, 13};
    CHECK(inet_socket_bytes(socks, &task) == 1000 + 30 + 200);
    CHECK(inet_socket_bytes(socks) == 1000 + 50 + 7000 + 30 + 200);
}

TEST_CASE("sockstat says which dumps are worth making") {
    const SockStat u = parse_sockstat(
        "sockets: used 3\nTCP: inuse 0 orphan 0 tw 0 alloc 1 mem 168\nUDP: inuse 2 mem 0\n"
        "UDPLITE: inuse 0\n",
        "TCP6: inuse 1\nUDP6: inuse 0\nUDPLITE6: inuse 0\n");
    CHECK(u.sockets == 3);
    CHECK_FALSE(u.tcp4);
    CHECK(u.udp4);
    CHECK(u.tcp6);
    CHECK_FALSE(u.udp6);
    // Only the sock_diag socket, and no TCP or UDP in use: nothing to list.
    CHECK_FALSE(
        parse_sockstat("sockets: used 1\nTCP: inuse 0 orphan 0\nUDP: inuse 0 mem 0\n", "").any());
    CHECK(parse_sockstat("sockets: used 1\nTCP: inuse 1 orphan 0\nUDP: inuse 0 mem 0\n", "")
              .any());                                       // an orphaned TCP socket
    const SockStat unknown = parse_sockstat("", "garbage");  // unreadable: every dump is made
    CHECK((unknown.any() && unknown.tcp4 && unknown.udp4 && unknown.tcp6 && unknown.udp6));
}

TEST_CASE("unix socket memory: the senders' skbs, and bounds for those whose sender closed") {
    const SockBounds b{400000, 1};
    const std::uint64_t stream = b.sndbuf_max + kStreamSkb;
    // A live pair: what is queued is the writer's wmem.
    CHECK(unix_socket_bytes({sock(1, SOCK_STREAM, kEstablished, 2, 0, 9000),
                             sock(2, SOCK_STREAM, kEstablished, 1, 8000, 0)},
                            b) == 9000);
    // The writer closed (peer 0, or one no longer listed): 1-byte writes bounded per byte...
    CHECK(unix_socket_bytes({sock(2, SOCK_STREAM, kEstablished, 0, 10)}, b) ==
          10 * kPerByte + kStreamSkb);
    CHECK(unix_socket_bytes({sock(2, SOCK_STREAM, kEstablished, 77, 10)}, b) ==
          10 * kPerByte + kStreamSkb);
    // ... and by the writer's buffer.
    CHECK(unix_socket_bytes({sock(2, SOCK_STREAM, kEstablished, 0, 300000)}, b) == stream);
    CHECK(unix_socket_bytes({sock(2, SOCK_STREAM, kEstablished, 0, 0)}, b) == 0);
    CHECK(unix_socket_bytes({sock(2, SOCK_STREAM, 7, 0, 0)}, b) == 0);  // never connected
    // Datagrams and seqpacket: a message may be empty, rqueue says nothing.
    const std::uint64_t dgram = 2 * b.sndbuf_max + 4096;
    CHECK(unix_socket_bytes({sock(2, SOCK_DGRAM, kEstablished, 0, 0)}, b) == dgram);
    CHECK(unix_socket_bytes({sock(2, SOCK_SEQPACKET, kEstablished, 0, 0)}, b) == dgram);
    CHECK(unix_socket_bytes({sock(2, SOCK_DGRAM, 7, 0, 0)}, b) == 0);  // no address, no peer
    // An address: max_dgram_qlen + 1 datagrams from senders nobody lists.
    CHECK(unix_socket_bytes({sock(2, SOCK_DGRAM, 7, 0, 0, 0, true)}, b) ==
          2 * (b.sndbuf_max + 4096));
    // A listener's pending connection whose client closed.
    UnixSock l = sock(3, SOCK_STREAM, kListen, 0, 2);
    l.icons = {4, 0};
    CHECK(unix_socket_bytes({l, sock(4, SOCK_STREAM, kEstablished, 0, 0, 100)}, b) == 100 + stream);
}

TEST_CASE("sock_diag in a network namespace of its own: what the kernel queues is counted") {
    // In a child: its own user and network namespaces, so that the host's sockets are not seen.
    const int status = test::exit_status_in_child([] {
        if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) ::_exit(77);  // no user namespaces
        int code = 0;
        try {
            sys::set_loopback_up();
            UniqueFd diag = open_net_meter(0);
            SocketMeter meter(diag.get(), SockBounds{400000, 1});
            if (meter.sample() != 0) code |= 1;
            int sv[2];
            if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) ::_exit(2);
            std::vector<char> data(100000, 'x');
            if (::write(sv[0], data.data(), data.size()) != 100000) ::_exit(3);
            const std::uint64_t live = meter.sample();
            if (live < 100000 || live > 150000) code |= 4;
            // By inode, as for a step's task: the writer's end holds it, the reader's nothing.
            struct stat w {
            }, r{};
            if (::fstat(sv[0], &w) || ::fstat(sv[1], &r)) ::_exit(7);
            if (meter.sample_of({static_cast<std::uint32_t>(w.st_ino)}) != live) code |= 64;
            if (meter.sample_of({static_cast<std::uint32_t>(r.st_ino)}) != 0) code |= 128;
            ::close(sv[0]);  // the writer's skbs stay in the reader's queue
            if (meter.sample() != 400000 + kStreamSkb) code |= 8;
            ::close(sv[1]);
            // TCP over loopback, unread.
            const int l = ::socket(AF_INET, SOCK_STREAM, 0), c = ::socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in a{};
            a.sin_family = AF_INET, a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            socklen_t len = sizeof a;
            if (::bind(l, reinterpret_cast<sockaddr*>(&a), len) || ::listen(l, 1) ||
                ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) ||
                ::connect(c, reinterpret_cast<sockaddr*>(&a), len))
                ::_exit(5);
            if (::write(c, data.data(), data.size()) != 100000) ::_exit(6);
            ::usleep(20000);
            if (meter.sample() < 100000) code |= 16;
        } catch (...) {
            code |= 32;
        }
        return code;
    });
    if (status == 77) {
        WARN("skipped: no user namespaces here");
        return;
    }
    CHECK(status == 0);
}
