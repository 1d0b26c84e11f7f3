// The control channel's frames over a real socket pair: every frame type round-trips, an fd
// travels beside its frame (the meters' in one frame), receive_if leaves other frames
// queued, EOF is nullopt, and frames that do not decode are refused.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "launcher/sandbox/channel.hpp"

using namespace gpubox;
using namespace gpubox::launcher;

namespace {

struct Pair {
    UniqueFd a, b;
    Pair() { sys::socketpair(a, b); }
};

template <typename T>
T round_trip(const channel::Frame& f) {
    Pair p;
    channel::send(p.a.get(), f);
    std::optional<channel::Frame> got = channel::receive(p.b.get());
    REQUIRE(got);
    REQUIRE(std::holds_alternative<T>(*got));
    return std::move(std::get<T>(*got));
}

}  // namespace

TEST_CASE("every frame type round-trips") {
    CHECK_FALSE(round_trip<channel::Go>(channel::Go{}).bound);
    CHECK(round_trip<channel::Go>(channel::Go{true}).bound);  // a bound root: mounts below ROOTFS
    CHECK(round_trip<channel::Failure>(
              channel::Failure{126, "execve(\"x\"): Permission denied\nhint"})
              .text == "execve(\"x\"): Permission denied\nhint");
    CHECK(round_trip<channel::Failure>(channel::Failure{127, ""}).code == 127);
    CHECK(round_trip<channel::Exited>(channel::Exited{0x0900}).wait_status == 0x0900);
    CHECK(round_trip<channel::Exited>(channel::Exited{0, 1234}).max_rss_kb == 1234);
    CHECK(round_trip<channel::Exited>(channel::Exited{0, 0, true}).alone);
    CHECK(!round_trip<channel::Exited>(channel::Exited{0x0900, 7}).alone);
    const channel::Meter m =
        round_trip<channel::Meter>(channel::Meter{sys::dup_cloexec(0), {}, sys::dup_cloexec(0)});
    CHECK(m.proc.valid());
    CHECK_FALSE(m.tmpfs.valid());
    CHECK(m.sockets.valid());
    CHECK_FALSE(m.clock.valid());
    CHECK(m.clock_error == 0);
    channel::Meter refused{sys::dup_cloexec(0)};  // init asked for the CPU counter, was refused
    refused.clock_error = EACCES;
    const channel::Meter r = round_trip<channel::Meter>(std::move(refused));
    CHECK_FALSE(r.clock.valid());
    CHECK(r.clock_error == EACCES);
    CHECK_FALSE(round_trip<channel::LateDir>(channel::LateDir{}).dir.valid());
}

TEST_CASE("the device plan arrives whole: ops, user_from and the late ops' prepared flags") {
    channel::DevicePlan sent;
    sent.late.full.ops = {rootfs::Tmpfs{.target = "/tmp"},
                          rootfs::BindDev{.source = "/dev/nvidia0", .target = "/dev/nvidia0"},
                          rootfs::Symlink{.link_text = "a", .path = "/b"},
                          rootfs::Bind{.source = "/s", .target = "/t"}};
    sent.late.full.user_from = 3;  // late ops: [1, 3)
    sent.late.prepared = {false, true};
    const channel::DevicePlan got = round_trip<channel::DevicePlan>(sent);
    CHECK(got.late.full.user_from == 3);
    CHECK(got.late.prepared == std::vector<bool>{false, true});
    REQUIRE(got.late.full.ops.size() == 4);
    CHECK(std::get<rootfs::Bind>(got.late.full.ops[3]).target == "/t");
    CHECK(std::get<rootfs::BindDev>(got.late.full.ops[1]).source == "/dev/nvidia0");
}

TEST_CASE("an fd travels beside its frame") {
    Pair p;
    UniqueFd dir = sys::open_at(AT_FDCWD, "/", O_PATH | O_DIRECTORY);
    const struct stat want = sys::fstat(dir.get(), "/");
    channel::send(p.a.get(), channel::PtyMaster{std::move(dir)});
    std::optional<channel::Frame> got = channel::receive(p.b.get());
    REQUIRE(got);
    const UniqueFd& fd = std::get<channel::PtyMaster>(*got).master;
    REQUIRE(fd.valid());
    CHECK(sys::fstat(fd.get(), "received").st_ino == want.st_ino);
    CHECK((::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC) != 0);
}

TEST_CASE("one frame carries the meters' fds, each where it was sent") {
    Pair p;
    UniqueFd root = sys::open_at(AT_FDCWD, "/", O_PATH | O_DIRECTORY),
             dev = sys::open_at(AT_FDCWD, "/dev", O_PATH | O_DIRECTORY),
             null = sys::open_at(AT_FDCWD, "/dev/null", O_RDONLY);
    const ino_t r = sys::fstat(root.get(), "/").st_ino, d = sys::fstat(dev.get(), "/dev").st_ino,
                n = sys::fstat(null.get(), "/dev/null").st_ino;
    UniqueFd stat = sys::open_at(AT_FDCWD, "/proc/self/net/sockstat", O_RDONLY);
    const ino_t v4 = sys::fstat(stat.get(), "sockstat").st_ino;
    UniqueFd clock = sys::open_at(AT_FDCWD, "/proc/self/stat", O_RDONLY);  // stands in for it
    const ino_t c = sys::fstat(clock.get(), "clock").st_ino;
    channel::send(p.a.get(), channel::Meter{std::move(root),
                                            std::move(dev),
                                            std::move(null),
                                            std::move(stat),
                                            {},
                                            std::move(clock)});
    std::optional<channel::Frame> got = channel::receive(p.b.get());
    REQUIRE(got);
    const auto& m = std::get<channel::Meter>(*got);
    CHECK(sys::fstat(m.proc.get(), "proc").st_ino == r);
    CHECK(sys::fstat(m.tmpfs.get(), "tmpfs").st_ino == d);
    CHECK(sys::fstat(m.sockets.get(), "sockets").st_ino == n);
    CHECK(sys::fstat(m.sockstat.get(), "sockstat").st_ino == v4);
    CHECK_FALSE(m.sockstat6.valid());
    CHECK(sys::fstat(m.clock.get(), "clock").st_ino == c);
    p.a.reset();
    CHECK_FALSE(channel::receive(p.b.get()));  // it was one frame: nothing else came
}

TEST_CASE("receive_if takes only its own type, and EOF is nullopt") {
    Pair p;
    channel::send(p.a.get(), channel::Failure{125, "early"});
    CHECK_FALSE(channel::receive_if<channel::LateDir>(p.b.get()));    // left queued ...
    const auto f = channel::receive_if<channel::Failure>(p.b.get());  // ... for whoever wants it
    REQUIRE(f);
    CHECK(f->text == "early");
    p.a.reset();
    CHECK_FALSE(channel::receive(p.b.get()));
    CHECK_FALSE(channel::receive_if<channel::Go>(p.b.get()));
}

TEST_CASE("frames that do not decode are refused") {
    auto raw = [](const std::string& bytes) {
        Pair p;
        sys::send_frame(p.a.get(), bytes, -1, "test");
        return channel::receive(p.b.get());
    };
    CHECK_THROWS_AS(raw(std::string(1, '\x7f')), SetupError);  // unknown tag
    const char exited = static_cast<char>(channel::tag_of<channel::Exited>());
    CHECK_THROWS_AS(raw(std::string(1, exited) + "ab"), SetupError);     // truncated
    CHECK_THROWS_AS(raw(std::string(1, exited) + "abcde"), SetupError);  // trailing bytes
    const char pty = static_cast<char>(channel::tag_of<channel::PtyMaster>());
    CHECK_THROWS_AS(raw(std::string(1, pty)), SetupError);  // its fd missing
    const char meter = static_cast<char>(channel::tag_of<channel::Meter>());
    const std::string no_error(4, '\0');                             // the CPU counter's errno
    CHECK_THROWS_AS(raw(std::string(1, meter) + '\0'), SetupError);  // its errno truncated
    CHECK_THROWS_AS(raw(std::string(1, meter) + '\0' + no_error), SetupError);  // its /proc missing
    CHECK_THROWS_AS(raw(std::string(1, meter) + '\x20' + no_error),
                    SetupError);  // an unknown meter
    auto with_fds = [](const std::string& bytes, int n) {
        Pair p;
        const int fds[] = {0, 0, 0};
        sys::send_frame(p.a.get(), bytes, std::span<const int>(fds, n), "test");
        return channel::receive(p.b.get());
    };
    CHECK(with_fds(std::string(1, meter) + '\1' + no_error, 2));  // /proc and tmpfs
    CHECK_THROWS_AS(with_fds(std::string(1, meter) + '\1' + no_error, 1),
                    SetupError);  // tmpfs missing
    CHECK_THROWS_AS(with_fds(std::string(1, meter) + '\0' + no_error, 3),
                    SetupError);  // fds it never takes
    const char plan = static_cast<char>(channel::tag_of<channel::DevicePlan>());
    CHECK_THROWS_AS(raw(std::string(1, plan) + std::string(24, '\xff')), SetupError);
}
