// The one-line answers to a new user's frictions (launcher/cli/cli_habits.hpp), --overlay's
// filesystem check and layer stack, and the limit lines in the units the options take.
#include <catch2/catch.hpp>
#include <fcntl.h>

#include <csignal>

#include "common/text.hpp"
#include "launcher/cli/cli_habits.hpp"
#include "launcher/monitor/kept_overlay.hpp"
#include "launcher/monitor/verdict.hpp"
#include "rootfs/layer_stack.hpp"

using namespace gpubox;
using namespace gpubox::launcher;

TEST_CASE("unit_size: a size as the options take it") {
    CHECK(unit_size(64ULL << 20) == "64M");
    CHECK(unit_size(1ULL << 30) == "1G");
    CHECK(unit_size(3072) == "3K");
    CHECK(unit_size(1000) == "1000B");
    CHECK(unit_size(0) == "0B");
}

TEST_CASE("docker's habits") {
    CHECK(docker_habit("-it", "").rfind("not needed:", 0) == 0);
    CHECK(docker_habit("--rm", "").rfind("not needed:", 0) == 0);
    CHECK(docker_habit("-e", "A=1") == "did you mean --env K=V?");
    CHECK(docker_habit("--gpus", "all") == "did you mean --gpu all?");
    CHECK(docker_habit("--gpus", "2") == "did you mean --gpu 2?");
    CHECK(docker_habit("--volume", "/a:/b") == "did you mean --bind /a:/b (or --ro-bind)?");
    CHECK(docker_habit("--frobnicate", "") == "");
    CHECK(verbose_as_volume("/a:/b") ==
          "run: -v is gpubox's \"more output\"; did you mean --bind /a:/b? (docker's -v SRC:DST)");
    CHECK(verbose_as_volume("./rootfs") == "");
    CHECK(verbose_as_volume("lab:py") == "");  // an image name, not a bind
}

TEST_CASE("options after ROOTFS") {
    const std::vector<std::pair<std::string, bool>> flags = {
        {"--gpu", true}, {"--share-net", false}, {"-v", false}};
    CHECK(option_after_rootfs("./r", {"--gpu", "0", "nvidia-smi", "-L"}, flags) ==
          "run: option \"--gpu\" after ROOTFS would be the command: options go before ROOTFS "
          "(gpubox run --gpu 0 ./r nvidia-smi -L)");
    CHECK(option_after_rootfs("./r", {"--gpu=0", "--share-net", "true"}, flags) ==
          "run: option \"--gpu\" after ROOTFS would be the command: options go before ROOTFS "
          "(gpubox run --gpu=0 --share-net ./r true)");
    CHECK(option_after_rootfs("./r", {"ls", "--gpu"}, flags) == "");  // CMD's own
    CHECK(option_after_rootfs("./r", {"-la"}, flags) == "");
    CHECK(option_after_rootfs("./r", {}, flags) == "");
    CHECK(option_after_rootfs("py", {"-v"}, flags) == "");  // an image's Entrypoint takes -v
}

TEST_CASE("CUDA_VISIBLE_DEVICES without --gpu") {
    CHECK(gpu_env_warning("0,1", false) ==
          "CUDA_VISIBLE_DEVICES=0,1 is set, but without --gpu the sandbox has no GPU");
    CHECK(gpu_env_warning("0,1", true) == "");
    CHECK(gpu_env_warning(nullptr, false) == "");
    CHECK(gpu_env_warning("NoDevFiles", false) == "");
    CHECK(gpu_env_warning("", false) == "");
}

TEST_CASE("--overlay: filesystems overlayfs refuses as an upper layer") {
    CHECK(upper_fs_problem(0x6969) == "NFS");
    CHECK(upper_fs_problem(0x794c7630) == "another overlay");
    CHECK(upper_fs_problem(0x0bd00bd0) == "Lustre");
    CHECK(upper_fs_problem(0xEF53) == "");      // ext4
    CHECK(upper_fs_problem(0x01021994) == "");  // tmpfs
}

TEST_CASE("limit lines in the options' units") {
    isolate::Limits l;
    RunOutcome o;
    o.have_status = true;
    SECTION("--fsize-limit: killed at the limit, isolate's SG") {
        l.fsize_bytes = 1 << 20;
        o.status = SIGXFSZ;
        const Verdict v = judge(o, l);
        CHECK(v.status == "SG");
        CHECK(v.killed);
        CHECK(v.limit == isolate::LimitName::fsize);
        CHECK(v.gpubox_exit == 128 + SIGXFSZ);
        CHECK(v.message == "killed: file size limit 1M exceeded (RLIMIT_FSIZE: SIGXFSZ)");
    }
    SECTION("SIGXFSZ without --fsize-limit: a signal like any") {
        o.status = SIGXFSZ;
        CHECK(!judge(o, l).killed);
    }
    SECTION("memory") {
        l.memory_bytes = 64 << 20;
        o.status = SIGKILL, o.oom_killed = true;
        CHECK(judge(o, l).message == "killed by the OOM killer: memory limit 64M");
    }
}

TEST_CASE("plan_layer_stack: what the root's overlay stacks") {
    const auto fd = [] { return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); };
    const auto p = [](const UniqueFd& f) { return cat("/proc/self/fd/", f.get()); };
    rootfs::RootLayer l;
    l.upper = fd(), l.work = fd();
    const int image = 42;
    SECTION("the default: gpubox's layer is the upper one, discarded") {
        const auto s = plan_layer_stack(rootfs::RootMode::overlay, l, {&image, 1});
        CHECK(s.lower == std::vector<std::string>{"/proc/self/fd/42"});
        CHECK(s.upper == p(l.upper));
        CHECK(s.work == p(l.work));
    }
    SECTION("--overlay DIR: DIR's upper and work; gpubox's layer (and the late one) below it") {
        l.late = fd(), l.kept_upper = fd(), l.kept_work = fd();
        const int layers[] = {7, 8};  // an image kept as layers, top first
        const auto s = plan_layer_stack(rootfs::RootMode::overlay, l, layers);
        CHECK(s.lower == std::vector<std::string>{p(l.upper), p(l.late), "/proc/self/fd/7",
                                                  "/proc/self/fd/8"});
        CHECK(s.upper == p(l.kept_upper));
        CHECK(s.work == p(l.kept_work));
    }
    SECTION("--read-only: no upper layer at all") {
        const auto s = plan_layer_stack(rootfs::RootMode::read_only, l, {&image, 1});
        CHECK(s.lower == std::vector<std::string>{p(l.upper), "/proc/self/fd/42"});
        CHECK(s.upper.empty());
    }
}
