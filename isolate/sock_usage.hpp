#pragma once
// The memory the kernel holds in the sandbox's socket buffers, which is in no process's resident
// set: read by the monitor through sock_diag (NETLINK_SOCK_DIAG) in the sandbox's own network
// namespace, from a socket init made there and sent it (a netlink socket dumps the sockets of
// the namespace it was made in). Without its own network namespace the dump lists the host's
// sockets: a step's task's own are charged from it (SocketMeter::sample_of, the inodes found
// through its fds); --share-net otherwise needs a cgroup to count them (docs/limits.md).
//
// What is counted, per socket, each pass (one dump per family and protocol, in the kernel):
//  - unix: a queued skb is charged to its SENDER (sk_wmem_alloc, its true size) until it is
//    read: the sum of wmem_alloc over every socket. What a sender that is gone left queued
//    leaves the list with it, and is charged to the socket that holds it, by a bound (below);
//  - TCP and UDP, IPv4 and IPv6: rmem_alloc + the larger of wmem_alloc and wmem_queued + the
//    backlog. An orphaned TCP socket (closed, its data unsent) is still listed.
//
// The bounds, for skbs whose sender is gone (SockBounds; sndbuf_max: twice net.core.wmem_max,
// the largest send buffer SO_SNDBUF gives):
//  - a connected stream socket whose peer closed (not listed), with rqueue bytes unread: its
//    peer's send buffer bounded what it could queue: sndbuf_max plus one more skb. A stream skb
//    holds at least one byte, at most 768 bytes of true size per byte (1-byte writes): the
//    less of that bound and 1 KiB x rqueue + one skb (the head one, partly read);
//  - a connected seqpacket or datagram socket whose peer closed: its peer's bound, 2 x
//    sndbuf_max (a full buffer, then one message as large; a message may be empty, so rqueue
//    says nothing);
//  - a datagram socket with an address (bound, or autobound by a send) may hold datagrams from
//    senders that closed, which nobody lists, and shows only its first one's length (which may
//    be 0, with more behind it): charged max_dgram_qlen + 1 datagrams of sndbuf_max, whatever
//    it shows. Init sets the namespace's net.unix.max_dgram_qlen to kDgramQlen under a memory
//    limit (the kernel's 10 would make it 11 buffers a socket). The queue limit holds for every
//    sender but the socket's peer, whose skbs are its own to count. A datagram socket with no
//    address receives from its peer only (a new peer purges its queue);
//  - a listening socket's pending connections whose client closed: the stream bound each.
// A peer that closed shows as peer 0 (its sock has no inode left) or as one no longer listed.
// net.core.wmem_max is the host's: a new network namespace starts with it, and where a user
// namespace owns it, it is read-only there (Linux 6.18; older kernels have one for all). The
// workload cannot change max_dgram_qlen either: no CAP_NET_ADMIN over its namespace, not the
// host's root.
#include <array>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/unique_fd.hpp"

namespace gpubox::isolate {

// The kernel's default net.core.wmem_max, where the host's cannot be read.
constexpr std::uint64_t kSockBufMax = 212992;
// net.unix.max_dgram_qlen in the sandbox's network namespace under a memory limit: a datagram
// socket's queue holds at most this many + 1 from senders other than its peer.
constexpr std::uint64_t kDgramQlen = 1;
// unix_diag's states (the kernel's TCP ones), and the stream bounds' constants.
constexpr std::uint8_t kEstablished = 1, kListen = 10;
constexpr std::uint64_t kStreamSkb = 64 * 1024, kPerByte = 1024;

struct SockBounds {
    std::uint64_t sndbuf_max = 2 * kSockBufMax;  // the largest send buffer a socket can have
    std::uint64_t dgram_qlen = kDgramQlen;
};

// One unix socket, from a SOCK_DIAG_BY_FAMILY reply (unix_diag_msg and its attributes).
struct UnixSock {
    std::uint32_t ino = 0, peer = 0;  // peer: 0 where none
    std::uint8_t type = 0, state = 0;
    bool named = false;        // UNIX_DIAG_NAME: it has an address
    std::uint32_t rqueue = 0;  // UNIX_DIAG_RQLEN: bytes unread (datagram: the first's length)
    std::uint64_t wmem = 0;    // SK_MEMINFO_WMEM_ALLOC: the true size of its skbs not yet read
    std::vector<std::uint32_t> icons;  // a listener's pending connections' clients
};
// One TCP or UDP socket's buffers (INET_DIAG_SKMEMINFO).
struct InetSock {
    // idiag_inode: 0 for a socket no file holds (a listener's connection not yet accepted, one
    // closed with its data unsent, TIME_WAIT).
    std::uint32_t ino = 0;
    std::uint8_t state = 0;                 // idiag_state (the kernel's TCP states; kListen)
    std::uint16_t sport = 0;                // its local port, as the kernel gives it
    std::array<std::uint32_t, 4> src = {};  // its local address (all 0: any)
    std::uint64_t rmem = 0, wmem = 0, queued = 0, backlog = 0;
};

enum class DumpState { more, done, failed };
// Pure. One buffer of a dump's reply (netlink messages): appends what it lists. `seq`: the
// request's; messages of another are skipped. failed: an NLMSG_ERROR, or a malformed message.
DumpState parse_unix_dump(const void* buf, std::size_t len, std::uint32_t seq,
                          std::vector<UnixSock>& out);
DumpState parse_inet_dump(const void* buf, std::size_t len, std::uint32_t seq,
                          std::vector<InetSock>& out);

// Pure. /proc/PID/net/sockstat's and sockstat6's text -> the sockets of that network namespace
// (its own count, the sock_diag socket included) and which of TCP and UDP over IPv4 and IPv6 are
// in use (text that does not say: in use). The inet dumps walk the host's whole hash tables
// (about 0.1 ms each, whatever the namespace holds), the unix one the namespace's sockets only:
// each is made where there is something to list. A TCP socket closed with its data unsent
// (orphaned) is no socket but still in use.
struct SockStat {
    std::uint64_t sockets = ~0ULL;
    bool tcp4 = true, udp4 = true, tcp6 = true, udp6 = true;
    // Past the sock_diag socket: anything at all (else sockstat6 need not be read).
    bool any() const { return sockets > 1 || tcp4 || udp4; }
};
SockStat parse_sockstat(const std::string& sockstat, const std::string& sockstat6);

// Pure. What the sockets hold, with the bounds above. `only`: charge those sockets alone (a
// step's task's, among the host's; whether a peer is gone is still read from every socket),
// and, of TCP, the connections not yet accepted of a listener among them (no file holds them:
// inode 0, on the listener's port and address).
using Inodes = std::unordered_set<std::uint32_t>;
std::uint64_t unix_socket_bytes(const std::vector<UnixSock>& socks, const SockBounds& b,
                                const Inodes* only = nullptr);
std::uint64_t inet_socket_bytes(const std::vector<InetSock>& socks, const Inodes* only = nullptr);

// Monitor side: one pass over `diag` (a NETLINK_SOCK_DIAG socket of the sandbox's network
// namespace): unix, then TCP and UDP over IPv4 and IPv6, where `stat` says there are any. A
// dump that fails counts what it listed before (a unix socket whose peer it did not list is
// charged as if that peer had closed: more, never less). A reply is waited for 1 s at most.
class SocketMeter {
public:
    SocketMeter(int diag, SockBounds bounds);
    // `inet` false: unix only, TCP and UDP as the last pass that read them found them.
    std::uint64_t sample(const SockStat& stat = {}, bool inet = true);
    // Where the sandbox shares a network namespace (a step's task, in the host's): what the
    // sockets `inodes` hold (found through the task's fds, isolate/kernel_walk.hpp), from one
    // dump of each family and protocol of the whole namespace. None: nothing is dumped.
    std::uint64_t sample_of(const Inodes& inodes);

private:
    template <typename Sock>
    void dump(const void* req, std::size_t len, std::vector<Sock>& out);  // to its end, or error
    std::uint64_t unix_bytes(const Inodes* only);                         // one unix dump, charged
    std::uint64_t inet_bytes(const SockStat& stat, const Inodes* only);   // those in use, charged
    int diag_;
    SockBounds bounds_;
    std::uint32_t seq_ = 0;
    std::uint64_t inet_bytes_ = 0;  // the last TCP and UDP dumps'
    std::vector<char> buf_;
};

// The bounds, from the host's net.core.wmem_max; `shared_net`: for sockets in the monitor's own
// network namespace (a step's task's), whose net.unix.max_dgram_qlen is not gpubox's to set:
// as it is there (the kernel's default, 10, where it cannot be read).
SockBounds host_sock_bounds(bool shared_net = false);

// Child side, in init, just after it made its network namespace (it owns it): sets its
// net.unix.max_dgram_qlen (0: leaves it), then opens the sock_diag socket for the monitor.
UniqueFd open_net_meter(std::uint32_t dgram_qlen);

}  // namespace gpubox::isolate
