#include "executor_harness.hpp"

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "rootfs/apply.hpp"
#include "rootfs/view.hpp"

namespace fs = std::filesystem;

namespace gpubox::component {
namespace {

std::set<std::string> mount_points() {
    std::ifstream in("/proc/self/mountinfo");
    std::set<std::string> out;
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::string id, parent, dev, root, point;
        fields >> id >> parent >> dev >> root >> point;
        out.insert(point);
    }
    return out;
}

void write_map(const char* file, const std::string& text) {
    std::ofstream out(file);
    out << text << std::flush;
    if (!out) throw std::runtime_error(std::string("cannot write ") + file);
}

// The child: its own user and mount namespace, then the sandbox's root assembly and the plan.
void refuse_openat2() {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0) != 0 ||
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(ctx) != 0)
        throw std::runtime_error("cannot install the openat2 filter");
    seccomp_release(ctx);
}

std::string run_child(const rootfs::MountPlan& plan, bool no_openat2) {
    const uid_t uid = ::getuid();
    const gid_t gid = ::getgid();
    sys::unshare(CLONE_NEWUSER | CLONE_NEWNS);
    write_map("/proc/self/setgroups", "deny");
    write_map("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
    write_map("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
    sys::make_rprivate();
    if (no_openat2) refuse_openat2();
    const std::set<std::string> before = mount_points();
    std::string out, entries;
    try {
        rootfs::RootLayer layer =
            rootfs::open_root_layer(plan, false, rootfs::bound_instead(plan.root));
        UniqueFd image = sys::open_at(AT_FDCWD, plan.root.rootfs, O_PATH | O_DIRECTORY);
        rootfs::RootDraft draft = rootfs::draft_root(plan, image.get(), std::move(layer));
        rootfs::NewRoot root = rootfs::assemble_root(plan, image.get(), std::move(draft), nullptr);
        rootfs::apply_mount_plan(plan, root);
        for (const auto& e : fs::directory_iterator(cat("/proc/self/fd/", root.mnt.get())))
            entries += e.path().filename().string() + '\n';
    } catch (...) {
        out = describe(std::current_exception());
    }
    out += '\0';
    for (const std::string& p : mount_points())
        if (!before.count(p)) out += p + '\n';
    return out + '\0' + entries;
}

}  // namespace

Tree::Tree() {
    char tmpl[] = "/tmp/gpubox-component-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    top_ = tmpl;
}

Tree::~Tree() {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(top_, ec);
         it != fs::recursive_directory_iterator(); ++it)
        if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
    fs::remove_all(top_, ec);
}

std::map<std::string, std::string> snapshot(const std::string& dir) {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        struct stat st {};
        ::lstat(e.path().c_str(), &st);
        std::ostringstream d;
        d << std::oct << st.st_mode << std::dec << ' ' << st.st_size << ' ' << st.st_mtime;
        if (S_ISLNK(st.st_mode)) d << " -> " << fs::read_symlink(e.path()).string();
        if (S_ISREG(st.st_mode)) d << ' ' << std::ifstream(e.path()).rdbuf();
        out[e.path().string().substr(dir.size())] = d.str();
    }
    return out;
}

Outcome apply_in_userns(const rootfs::MountPlan& plan, bool no_openat2) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        std::string text;
        try {
            text = run_child(plan, no_openat2);
        } catch (...) {
            text = "harness: " + describe(std::current_exception()) + '\0';
        }
        const bool sent =
            ::write(fds[1], text.data(), text.size()) == static_cast<ssize_t>(text.size());
        ::_exit(sent ? 0 : 1);
    }
    ::close(fds[1]);
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
        text.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    Outcome o;
    const std::size_t nul = text.find('\0');
    o.error = text.substr(0, nul);
    const std::size_t nul2 = nul == std::string::npos ? nul : text.find('\0', nul + 1);
    std::istringstream mounts(nul == std::string::npos ? "" : text.substr(nul + 1, nul2 - nul - 1));
    for (std::string line; std::getline(mounts, line);) o.new_mounts.push_back(line);
    std::istringstream names(nul2 == std::string::npos ? "" : text.substr(nul2 + 1));
    for (std::string line; std::getline(names, line);) o.root_entries.insert(line);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        o.error = "harness: the child died: " + o.error;
    return o;
}

rootfs::MountPlan plan_over(const std::string& rootfs, std::vector<rootfs::MountOp> ops,
                            rootfs::RootMode mode) {
    rootfs::MountPlan plan;
    plan.root = {rootfs, mode, 16 << 20};
    plan.ops = std::move(ops);
    plan.user_from = 0;
    return plan;
}

}  // namespace gpubox::component
