#pragma once
// The one control channel between the monitor and the sandbox: a SOCK_SEQPACKET pair (see
// sys::socketpair) carrying typed frames both ways. A frame is one datagram: a tag (Tag, one
// byte), then that type's fixed layout, then its variable tail, and the fds it carries beside it
// (at most sys::kMaxFrameFds).
// Being datagrams, frames from init and the workload never interleave;
// EOF means every sandbox end is closed (the workload's at exec: O_CLOEXEC).
//
//   monitor -> init      Go         the id maps are written: init may go on (and whether ROOTFS
//                                   has mounts below it: a bound root, not an overlay)
//                        DevicePlan the plan grown by the GPU's ops, placed by the monitor
//   init -> monitor      RootView   ROOTFS, read-only, for the monitor's reads (rootfs/view.hpp)
//                        LateDir    the layer's late directory, for the GPU's entries
//   init, workload ->    Failure    the sandbox failed: exit code and message (incl. hint)
//   init -> monitor      Exited     the workload's wait status
//                        Meter      the sandbox's /proc, gpubox's tmpfs, a sock_diag socket and the
//                                   workload's CPU counter, for the monitor to measure them
//                                   (isolate/usage.hpp), sent before the workload runs
//   workload -> monitor  PtyMaster  its pty's master (on the pty socket, launcher/monitor/pty.hpp)
//   init -> keeper       StepReady  a step's sandbox is set up (launcher/monitor/step.hpp)
//   go-between -> monitor Joined    a joining task's init, in the sandbox (monitor/run.cpp)
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include "common/unique_fd.hpp"
#include "rootfs/apply.hpp"

namespace gpubox::launcher::channel {

struct Go {
    bool bound = false;  // ROOTFS has mounts below it (rootfs::has_submounts), read meanwhile
};
struct DevicePlan {
    rootfs::LatePlan late;  // full: the whole plan to apply; prepared: per late op
};
struct RootView {
    UniqueFd root;  // a read-only mount of ROOTFS: reading it changes no timestamp in it
};
struct LateDir {
    UniqueFd dir;  // none: the root is bound, the monitor makes no entries
};
struct Failure {
    int code = 0;      // gpubox's exit code for it
    std::string text;  // describe() of the error, and a hint line after '\n' if there is one
};
struct Exited {
    int wait_status = 0;
    long max_rss_kb = 0;  // the workload's processes' peak resident set (init's RUSAGE_CHILDREN)
    // Init has no child left (orphans come to init, so nothing of the workload's runs or ever
    // will): only joiners from outside (a named sandbox's gpubox exec) could still be there.
    bool alone = false;
};
struct Meter {         // one frame for all: the monitor wakes once for them
    UniqueFd proc;     // the sandbox's /proc (required)
    UniqueFd tmpfs;    // gpubox's tmpfs, if it has one
    UniqueFd sockets;  // a sock_diag socket of its network namespace (isolate/sock_usage.hpp)
    // Its sockstat and sockstat6, opened by init: readable after init's exit, when its /proc
    // entry is gone (a run shorter than a pass: the last pass would dump every protocol).
    UniqueFd sockstat, sockstat6;
    // The workload's CPU counter, which init opened on itself (isolate/tree_clock.hpp), or the
    // errno the kernel refused it with (0: none was asked for).
    UniqueFd clock;
    int clock_error = 0;
};
struct PtyMaster {
    UniqueFd master;
};

struct StepReady {
    UniqueFd holder;  // the pidfd of the process that holds the workloads' user namespace
};
struct Joined {
    int pid = 0;  // as the monitor sees it
    UniqueFd pidfd;
};

using Frame = std::variant<Go, DevicePlan, RootView, LateDir, Failure, Exited, Meter, PtyMaster,
                           StepReady, Joined>;

// The tag on the wire, one per frame type, in Frame's order (checked below).
enum class Tag : std::uint8_t {
    go,
    device_plan,
    root_view,
    late_dir,
    failure,
    exited,
    meter,
    pty_master,
    step_ready,
    joined
};
constexpr Tag tag(const Frame& frame) { return static_cast<Tag>(frame.index()); }

// One frame, one sendmsg; a peer that is gone throws SysError(EPIPE).
void send(int sock, const Frame& frame);
// The next frame's tag (a Tag), left queued; -1 at EOF.
int peek_tag(int sock);
// The next frame; nullopt at EOF. A frame that does not decode throws SetupError.
std::optional<Frame> receive(int sock);
// The tag of frame type T: its index in Frame.
template <typename T, std::size_t I = 0>
constexpr Tag tag_of() {
    static_assert(I < std::variant_size_v<Frame>, "not a frame type");
    if constexpr (std::is_same_v<std::variant_alternative_t<I, Frame>, T>) return Tag{I};
    else return tag_of<T, I + 1>();
}
static_assert(tag_of<Go>() == Tag::go && tag_of<DevicePlan>() == Tag::device_plan &&
              tag_of<RootView>() == Tag::root_view && tag_of<LateDir>() == Tag::late_dir &&
              tag_of<Failure>() == Tag::failure && tag_of<Exited>() == Tag::exited &&
              tag_of<Meter>() == Tag::meter && tag_of<PtyMaster>() == Tag::pty_master &&
              tag_of<StepReady>() == Tag::step_ready && tag_of<Joined>() == Tag::joined &&
              std::variant_size_v<Frame> == 10);
// The next frame if it is a T; nullopt, with the frame left queued, if it is another or at EOF.
template <typename T>
std::optional<T> receive_if(int sock) {
    if (peek_tag(sock) != static_cast<int>(tag_of<T>())) return std::nullopt;
    return std::get<T>(*receive(sock));
}

// The sandbox side, for frames that must not throw: a failed send is dropped (the monitor is
// gone, or sees EOF and reports that instead).
void send_quietly(int sock, const Frame& frame) noexcept;

}  // namespace gpubox::launcher::channel
