// The executor against hostile image trees. Each case asserts what the user would see (the
// error: step, syscall, path, errno) and that nothing outside the new root changed: every mount
// lies under ROOTFS, and the temp tree (ROOTFS itself, the victim beside it) is as it was.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <algorithm>
#include <map>

#include "executor_harness.hpp"

using namespace gpubox;
using namespace gpubox::component;
using rootfs::Bind;

namespace {

// ROOTFS with a usable /bin, a bind source beside it, and a victim directory holding a file.
void populate(const Tree& t) {
    for (const char* d : {"root", "root/bin", "src", "victim"}) ::mkdir(t.path(d).c_str(), 0755);
    std::ofstream(t.path("src/f")) << "data\n";
    std::ofstream(t.path("victim/file")) << "untouched\n";
}

Bind bind_src(const Tree& t, const std::string& target) {
    return Bind{.source = t.path("src"), .target = target, .kind = rootfs::SourceKind::dir};
}

// Every mount the executor added lies under ROOTFS; the temp tree (ROOTFS, the victim, the
// source) is as it was before.
void require_contained(const Tree& t, const Outcome& o,
                       const std::map<std::string, std::string>& before) {
    for (const std::string& m : o.new_mounts) {
        INFO("new mount point " << m);
        CHECK(m.rfind(t.path("root"), 0) == 0);
    }
    CHECK(snapshot(t.top()) == before);
}

// The error the user would read: the plan step, the path, the errno's text at the end.
void require_error(const Outcome& o, const std::string& target, const std::string& errno_text) {
    INFO(o.error);
    CHECK(o.error.rfind("mount step 1/1 (ro-bind ", 0) == 0);
    CHECK(o.error.find("-> " + target + "): ") != std::string::npos);
    CHECK(o.error.size() > errno_text.size());
    CHECK(o.error.substr(o.error.size() - errno_text.size()) == errno_text);
}

Outcome apply_bind(const Tree& t, const std::string& target, rootfs::RootMode mode,
                   bool no_openat2) {
    return apply_in_userns(plan_over(t.path("root"), {bind_src(t, target)}, mode), no_openat2);
}

bool mounted_at(const Outcome& o, const std::string& point) {
    return std::find(o.new_mounts.begin(), o.new_mounts.end(), point) != o.new_mounts.end();
}

constexpr auto kOverlay = rootfs::RootMode::overlay;
constexpr auto kWritable = rootfs::RootMode::writable;  // nothing may be created in ROOTFS

}  // namespace

TEST_CASE("a mount point behind a link out of the root is made inside the root") {
    // With openat2, and with the resolver's own walk (openat2 refused).
    const bool walk = GENERATE(false, true);
    INFO((walk ? "openat2 refused (ENOSYS): the resolver's own walk" : "with openat2"));
    Tree t;
    populate(t);
    // absolute, to a host path; relative, climbing out
    REQUIRE(::symlink(t.path("victim").c_str(), t.path("root/opt").c_str()) == 0);
    REQUIRE(::symlink("../../../../victim", t.path("root/srv").c_str()) == 0);
    const auto before = snapshot(t.top());
    Outcome abs = apply_bind(t, "/opt/x", kOverlay, walk);
    CHECK(abs.error == "");
    CHECK(mounted_at(abs, t.path("root") + t.path("victim/x")));  // the host path, read in the root
    require_contained(t, abs, before);
    Outcome rel = apply_bind(t, "/srv/y", kOverlay, walk);
    CHECK(rel.error == "");
    CHECK(mounted_at(rel, t.path("root/victim/y")));  // ".." stops at the root
    require_contained(t, rel, before);
    for (const char* target : {"/opt/x", "/srv/y"}) {
        Outcome w = apply_bind(t, target, kWritable, walk);
        require_error(
            w, target,
            "(its directory is not on a filesystem gpubox mounted): Operation not permitted");
        require_contained(t, w, before);
    }
}

TEST_CASE("a file where a directory is expected fails with ENOTDIR, naming the path") {
    // With openat2, and with the resolver's own walk (openat2 refused).
    const bool walk = GENERATE(false, true);
    INFO((walk ? "openat2 refused (ENOSYS): the resolver's own walk" : "with openat2"));
    Tree t;
    populate(t);
    std::ofstream(t.path("root/etc2")) << "a file\n";
    const auto before = snapshot(t.top());
    for (auto mode : {kOverlay, kWritable}) {
        Outcome o = apply_bind(t, "/etc2/x", mode, walk);
        require_error(o, "/etc2/x", "Not a directory");
        CHECK(o.error.find("etc2") != std::string::npos);
        require_contained(t, o, before);
    }
}

TEST_CASE("a fifo at a mount point is never opened for reading") {
    // With openat2, and with the resolver's own walk (openat2 refused).
    const bool walk = GENERATE(false, true);
    INFO((walk ? "openat2 refused (ENOSYS): the resolver's own walk" : "with openat2"));
    Tree t;
    populate(t);
    REQUIRE(::mkfifo(t.path("root/pipe").c_str(), 0644) == 0);
    const auto before = snapshot(t.top());
    // The overlay root takes a directory over it in gpubox's layer; a --writable root cannot.
    Outcome o = apply_bind(t, "/pipe", kOverlay, walk);
    CHECK(o.error == "");
    CHECK(mounted_at(o, t.path("root/pipe")));
    require_contained(t, o, before);
    Outcome w = apply_bind(t, "/pipe", kWritable, walk);
    require_error(w, "/pipe", "mount point \"/pipe\" in the new root: Not a directory");
    require_contained(t, w, before);
}

TEST_CASE("a read-only directory of the image takes its mount point in the layer, not in ROOTFS") {
    // With openat2, and with the resolver's own walk (openat2 refused).
    const bool walk = GENERATE(false, true);
    INFO((walk ? "openat2 refused (ENOSYS): the resolver's own walk" : "with openat2"));
    Tree t;
    populate(t);
    REQUIRE(::mkdir(t.path("root/ro").c_str(), 0555) == 0);
    const auto before = snapshot(t.top());
    Outcome o = apply_bind(t, "/ro/x", kOverlay, walk);
    CHECK(o.error == "");
    CHECK(mounted_at(o, t.path("root/ro/x")));
    require_contained(t, o, before);
    Outcome w = apply_bind(t, "/ro/x", kWritable, walk);
    require_error(w, "/ro/x",
                  "(its directory is not on a filesystem gpubox mounted): Operation not permitted");
    require_contained(t, w, before);
}

TEST_CASE("a tmpfs root has the plan's mount points and nothing of ROOTFS, which stays as it was") {
    // isolate mode's box root: the rules' directories alone, as in isolate's own tmpfs root.
    Tree t;
    populate(t);
    std::ofstream(t.path("root/secret")) << "not for the sandbox\n";
    const auto before = snapshot(t.top());
    Outcome o =
        apply_in_userns(plan_over(t.path("root"), {bind_src(t, "/box"), bind_src(t, "/usr/lib")},
                                  rootfs::RootMode::tmpfs),
                        false);
    CHECK(o.error == "");
    CHECK(o.root_entries == std::set<std::string>{"box", "usr"});
    CHECK(mounted_at(o, t.path("root/box")));
    CHECK(mounted_at(o, t.path("root/usr/lib")));
    require_contained(t, o, before);
}

TEST_CASE("a symlink chain past the hop limit fails with ELOOP") {
    // With openat2, and with the resolver's own walk (openat2 refused).
    const bool walk = GENERATE(false, true);
    INFO((walk ? "openat2 refused (ENOSYS): the resolver's own walk" : "with openat2"));
    Tree t;
    populate(t);
    REQUIRE(::mkdir(t.path("root/deep").c_str(), 0755) == 0);
    for (int i = 0; i < 45; ++i)  // l0 -> l1 -> ... -> l45 -> deep: 46 links
        REQUIRE(::symlink(("l" + std::to_string(i + 1)).c_str(),
                          t.path("root/l" + std::to_string(i)).c_str()) == 0);
    REQUIRE(::symlink("deep", t.path("root/l45").c_str()) == 0);
    const auto before = snapshot(t.top());
    Outcome near = apply_bind(t, "/l40/x", kOverlay, walk);  // 6 links: followed, inside the root
    CHECK(near.error == "");
    CHECK(mounted_at(near, t.path("root/deep/x")));
    require_contained(t, near, before);
    for (auto mode : {kOverlay, kWritable}) {
        Outcome o = apply_bind(t, "/l0/x", mode, walk);
        require_error(o, "/l0/x", "Too many levels of symbolic links");
        require_contained(t, o, before);
    }
}
