// isolate mode's executor. A box is <boxes>/<id> (box/ for the program's /box, root/ an empty
// root for its mounts) with a lock file <boxes>/<id>.lock beside it, which, as isolate's, is
// never unlinked (only truncated), records the owner and the --cg mode, and is flock()ed while a
// command works on the box. <boxes> is the caller's own (common/trusted_path.hpp), opened once;
// the lock, the box's directories, their removal and the sweep after a run work relative to it.
#include "launcher/ioi/box.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>

#include "common/print.hpp"
#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "common/trusted_path.hpp"
#include "launcher/ioi/box_tree.hpp"
#include "launcher/ioi/cli.hpp"
#include "launcher/ioi/plan.hpp"
#include "launcher/monitor/meta_isolate.hpp"
#include "launcher/monitor/run.hpp"

extern char** environ;

namespace gpubox::ioi {
namespace {

namespace fs = std::filesystem;

// An error isolate reports with die(): status XX, exit 2.
struct IsolateDie : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct LockRecord {
    unsigned owner = 0;
    bool cg = false, initialized = false;
};

std::string render_lock(const LockRecord& r) {
    return cat("gpubox-isolate-lock 1 uid=", r.owner, " cg=", r.cg ? 1 : 0,
               " init=", r.initialized ? 1 : 0, "\n");
}

bool parse_lock(const std::string& text, LockRecord& r) {
    unsigned uid = 0;
    int cg = 0, init = 0;
    if (std::sscanf(text.c_str(), "gpubox-isolate-lock 1 uid=%u cg=%d init=%d", &uid, &cg, &init) !=
        3)
        return false;
    r = {uid, cg != 0, init != 0};
    return true;
}

struct BoxLock {
    UniqueFd fd;
    LockRecord rec;
    std::string path;
    void write() const {
        sys::ftruncate(fd.get(), 0, path);
        const std::string text = render_lock(rec);
        try {
            sys::pwrite_all(fd.get(), text, 0, path);
        } catch (const SysError& e) {
            throw IsolateDie("Cannot write lock file: " + std::string(std::strerror(e.err())));
        }
    }
};

// A lock another user owns cannot be opened read-write: say whose box it is, as isolate does.
[[noreturn]] void refuse_foreign_lock(int boxes, const std::string& name, const std::string& path,
                                      int err) {
    LockRecord other;
    if (parse_lock(sys::try_read_at(boxes, name), other) && other.initialized &&
        other.owner != ::getuid())
        throw IsolateDie(cat("This box belongs to a different user (uid ", other.owner, ")"));
    throw IsolateDie(cat("Cannot open ", path, ": ", std::strerror(err)));
}

// isolate.c: lock_box(), on <id>.lock in the boxes' root `boxes`. False: there is no box (never
// made, or cleaned up).
bool lock_box(BoxLock& lock, const IsolateArgs& a, int boxes, const std::string& root, bool is_init,
              bool is_cleanup) {
    const std::string name = cat(a.box_id, ".lock");
    lock.path = cat(root, "/", name);
    const std::string& path = lock.path;
    const int fd = sys::try_open_at(
        boxes, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | (is_init ? O_CREAT : 0), 0644);
    if (fd == -ENOENT) return false;
    if (fd == -EACCES) refuse_foreign_lock(boxes, name, path, EACCES);
    if (fd < 0) throw IsolateDie(cat("Cannot open ", path, ": ", std::strerror(-fd)));
    lock.fd = UniqueFd(fd);
    if (!sys::flock_exclusive(fd, a.wait, path))
        throw IsolateDie("This box is currently in use by another process");
    const std::string text = sys::read_all(fd, path, 4096);
    const bool present = !text.empty();
    if (present && !parse_lock(text, lock.rec))
        throw IsolateDie(cat("Lock file ", path, " has incompatible format"));
    if (present && lock.rec.initialized && lock.rec.owner != ::getuid())
        throw IsolateDie(cat("This box belongs to a different user (uid ", lock.rec.owner, ")"));
    if (present && lock.rec.cg != a.cg)
        throw IsolateDie("This box was initialized with an incompatible control group mode");
    if (is_init) {
        lock.rec = {::getuid(), a.cg, false};
        lock.write();
        return true;
    }
    if (present && !lock.rec.initialized && !is_cleanup)
        throw IsolateDie("This box was not initialized properly");
    return present;
}

// The boxes' root: the caller's own, made 0700 where missing (common/trusted_path.hpp).
UniqueFd open_boxes_root(const std::string& root) {
    try {
        return trusted_path::open_state_dir(
            root, trusted_path::Missing::create, "box root",
            "set GPUBOX_ISOLATE_ROOT or XDG_RUNTIME_DIR to a directory of your own");
    } catch (...) {
        const auto e = std::current_exception();
        throw IsolateDie(cat(describe(e), "; ", hint_for(e)));
    }
}

// A directory `name` of `dir` (never a symlink), as an O_PATH fd.
UniqueFd open_dir_at(int dir, const std::string& name) {
    return sys::open_at(dir, name, O_PATH | O_NOFOLLOW | O_DIRECTORY);
}

// The caller's fds 0-2 while the program runs: -i, -o, -r (opened in their bound host
// directory, resolved inside it as isolate resolves them inside the box) and --stderr-to-stdout.
// Restored on the way out, so isolate's own messages reach the caller.
class Redirection {
public:
    Redirection(const std::array<Redirect, 3>& r, bool err_to_out) {
        std::array<UniqueFd, 3> opened;
        const int flags[3] = {O_RDONLY, O_WRONLY | O_CREAT | O_TRUNC, O_WRONLY | O_CREAT | O_TRUNC};
        for (int i = 0; i < 3; ++i)
            if (!r[i].host_dir.empty()) opened[i] = open_redirect(r[i], flags[i]);
        for (int i = 0; i < 3; ++i) saved_[i] = sys::dup_cloexec(i);
        for (int i = 0; i < 3; ++i)
            if (opened[i].valid()) sys::dup2(opened[i].get(), i);
        if (err_to_out) sys::dup2(1, 2);
    }
    ~Redirection() {
        for (int i = 0; i < 3; ++i)
            if (saved_[i].valid()) restore(saved_[i].get(), i);
    }
    Redirection(const Redirection&) = delete;
    Redirection& operator=(const Redirection&) = delete;

private:
    // A destructor must not throw: a stream that cannot be put back stays as it is.
    static void restore(int saved, int fd) noexcept {
        try {
            sys::dup2(saved, fd);
        } catch (const SysError&) {}
    }
    static UniqueFd open_redirect(const Redirect& r, int flags) {
        UniqueFd dir = sys::open_at(AT_FDCWD, r.host_dir, O_PATH | O_DIRECTORY);
        const int fd =
            sys::try_openat2(dir.get(), r.rel, flags | O_CLOEXEC,
                             RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, (flags & O_CREAT) ? 0666 : 0);
        if (fd < 0) throw IsolateDie(cat("open(\"", r.sandbox_path, "\"): ", std::strerror(-fd)));
        if (!(flags & O_TRUNC)) return UniqueFd(fd);
        // -o and -r rewritten run after run in one box (a judge's loop over its tests): the
        // program's output kept from ext4's flush at its close (trusted_path::written_apart).
        try {
            return trusted_path::written_apart(UniqueFd(fd), flags, r.sandbox_path);
        } catch (const SysError& e) {
            throw IsolateDie(cat("open(\"", r.sandbox_path, "\"): ", std::strerror(e.err())));
        }
    }
    std::array<UniqueFd, 3> saved_;
};

IsolateHost current_host() {
    IsolateHost h;
    h.exists = [](const std::string& p) {
        std::error_code ec;
        return fs::exists(p, ec);
    };
    for (char** e = environ; *e; ++e) {
        const std::string kv = *e;
        const auto eq = kv.find('=');
        if (eq != std::string::npos) h.environ.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    h.uid = ::getuid(), h.gid = ::getgid();
    for (int i = 0; i < 3; ++i) {
        struct stat st {};
        h.regular_file[i] = sys::try_fstat(i, st) && S_ISREG(st.st_mode);
    }
    return h;
}

// -M: opened as isolate's meta_open() opens it, before anything else (truncated then, written
// once the verdict is known), but without blocking or following a symlink, and only a regular
// file or a new one (common/trusted_path.hpp); "-" is stdout.
struct MetaFile {
    std::string path;
    UniqueFd fd;
    bool to_stdout = false;
};

MetaFile open_meta(const std::string& path) {
    MetaFile m{path, {}, path == "-"};
    if (path.empty() || m.to_stdout) return m;
    try {
        m.fd = trusted_path::open_output_file(path, 0666);
    } catch (const SysError& e) {
        throw IsolateDie(cat("Failed to open metafile '", path, "': ", std::strerror(e.err())));
    } catch (const PlanError& e) {
        throw IsolateDie(cat("Failed to open metafile '", path, "': ", e.what()));
    }
    return m;
}

// Throws SysError where the verdict cannot be written.
void write_meta(const MetaFile& m, const std::string& text) {
    if (m.to_stdout) return sys::write_all(1, text, "stdout");
    if (m.fd.valid()) sys::write_all(m.fd.get(), text, m.path);
}

std::string self_name(const IsolateArgs& a) { return a.cg ? "isolate --cg" : "isolate"; }

int do_init(const IsolateArgs& a, int boxes, const BoxPaths& box, const std::string& root) {
    BoxLock lock;
    lock_box(lock, a, boxes, root, true, false);
    const std::string id = std::to_string(a.box_id);
    remove_box_tree(boxes, id);
    if (const int err = sys::try_mkdir_at(boxes, id, 0700))
        throw IsolateDie(cat("Cannot create ", box.dir, ": ", std::strerror(-err)));
    const UniqueFd dir = open_dir_at(boxes, id);
    for (const auto& [name, mode] : {std::pair{"box", 0700}, {"root", 0755}})
        if (const int err = sys::try_mkdir_at(dir.get(), name, mode))
            throw IsolateDie(cat("Cannot create ", box.dir, "/", name, ": ", std::strerror(-err)));
    lock.rec.initialized = true;
    lock.write();
    print(box.dir + "\n");
    return 0;
}

int do_cleanup(const IsolateArgs& a, int boxes, const std::string& root) {
    BoxLock lock;
    if (!lock_box(lock, a, boxes, root, false, true)) {
        if (a.verbose) print_err("Nothing to do -- box did not exist\n");
        return 0;
    }
    remove_box_tree(boxes, std::to_string(a.box_id));
    sys::ftruncate(lock.fd.get(), 0, lock.path);  // never unlinked, as isolate's
    return 0;
}

// The verdict could not be written to -M after the run: it goes to stderr in full, and the run
// is an internal error (exit 2), since the judge reads its verdict from the meta file.
int meta_write_failed(const MetaFile& m, const SysError& e, const std::string& text) {
    try {
        sys::ftruncate(m.fd.get(), 0, m.path);  // not half a verdict
    } catch (const SysError&) {}
    print_err(cat("Failed to write metafile '", m.path, "': ", std::strerror(e.err()),
                  "; its contents follow\n", text));
    return 2;
}

int do_run(const IsolateArgs& a, int boxes, const BoxPaths& box, const std::string& root,
           const MetaFile& meta) {
    BoxLock lock;
    if (!lock_box(lock, a, boxes, root, false, false))
        throw IsolateDie(cat("Box not found, did you run `", self_name(a), " --init'?"));
    const IsolateRun plan = plan_isolate_run(a, box, current_host());
    launcher::RunReport rep;
    {
        Redirection redirect(plan.redirect, a.stderr_to_stdout);
        launcher::run_sandbox(plan.options, &rep);
    }
    // --cg on the bounded fallback (no delegated cgroup v2 with memory): said once, on gpubox's
    // own stderr, after the run (GPUBOX_REQUIRE_CGROUP=1 refuses instead).
    if (a.cg && !rep.outcome.setup_failed && !rep.outcome.memory_peak_cgroup)
        print_err(
            "gpubox: isolate --cg: no delegated cgroup v2 with the memory controller here: "
            "limits were the monitor's bounded fallback (see 'gpubox doctor'; "
            "GPUBOX_REQUIRE_CGROUP=1 refuses instead)\n");
    if (!a.special_files)  // the judge never follows or blocks on what the program left
        sweep_special_files(open_dir_at(boxes, std::to_string(a.box_id)).get(), "box");
    const launcher::IsolateResult r =
        launcher::isolate_result(rep.verdict, rep.outcome, plan.report_limits);
    if (r.status == "XX") throw IsolateDie(r.message);
    const std::string text =
        launcher::render_meta_isolate(rep.verdict, rep.outcome, plan.report_limits);
    try {
        write_meta(meta, text);
    } catch (const SysError& e) {
        return meta_write_failed(meta, e, text);
    }
    if (rep.outcome.setup_failed)
        print_err(rep.outcome.message + "\n");  // as the program's execve() error
    if (r.status.empty()) {
        if (!a.silent)
            print_err(cat("OK (", launcher::isolate_seconds(rep.outcome.cpu_seconds), " sec real, ",
                          launcher::isolate_seconds(rep.outcome.wall_seconds), " sec wall)\n"));
        return 0;
    }
    if (!a.silent) print_err(r.message + "\n");
    return 1;
}

// isolate.c: die(): status XX in the meta file, the message on stderr, exit 2.
int die(const MetaFile& meta, const std::string& message) {
    try {
        write_meta(meta, cat("status:XX\nmessage:", message, "\n"));
    } catch (...) {}
    print_err(message + "\n");
    return 2;
}

constexpr int kNumBoxes = 100000;

int dispatch(const IsolateArgs& a, const std::string& root, const MetaFile& meta) {
    if (const std::string why = unsupported_isolate_request(a, ::getuid(), ::getgid());
        !why.empty())
        throw IsolateDie(why);
    if (a.box_id < 0 || a.box_id >= kNumBoxes)
        throw IsolateDie(cat("Sandbox ID out of range (allowed: 0-", kNumBoxes - 1, ")"));
    const UniqueFd boxes = open_boxes_root(root);
    const BoxPaths box = box_paths(root, a.box_id);
    if (a.mode == IsolateMode::init) return do_init(a, boxes.get(), box, root);
    if (a.mode == IsolateMode::cleanup) return do_cleanup(a, boxes.get(), root);
    return do_run(a, boxes.get(), box, root, meta);
}

}  // namespace

int isolate_main(const std::vector<std::string>& args) {
    const std::string root = isolate_boxes_root(std::getenv("GPUBOX_ISOLATE_ROOT"),
                                                std::getenv("XDG_RUNTIME_DIR"), ::getuid());
    IsolateArgs a;
    try {
        a = parse_isolate_command_line(args);
    } catch (const UsageError& e) {
        print_err(cat(e.what(), "\nTry 'isolate --help' for more information.\n"));
        return 2;
    }
    switch (a.mode) {
        case IsolateMode::help:
            print(isolate_usage_text(
                cat(root,
                    "/<id> (GPUBOX_ISOLATE_ROOT, else $XDG_RUNTIME_DIR/gpubox/isolate, "
                    "else /tmp/gpubox-isolate-<uid>)")));
            return 0;
        case IsolateMode::version: print(isolate_version_text()); return 0;
        case IsolateMode::check_config: return 0;
        default: break;
    }
    MetaFile meta;
    try {
        meta = open_meta(a.meta);
    } catch (const IsolateDie& e) {
        return die(meta, e.what());
    }
    if (a.mode == IsolateMode::print_cg_root)
        return die(meta,
                   "gpubox has no cgroup root of its own: it uses a delegated cgroup v2 where it "
                   "finds one");
    try {
        return dispatch(a, root, meta);
    } catch (...) {
        return die(meta, describe(std::current_exception()));
    }
}

std::string isolate_boxes_root(const char* override_root, const char* xdg_runtime_dir,
                               unsigned uid) {
    if (override_root && *override_root) return override_root;
    if (xdg_runtime_dir && *xdg_runtime_dir) return cat(xdg_runtime_dir, "/gpubox/isolate");
    return cat("/tmp/gpubox-isolate-", uid);
}

}  // namespace gpubox::ioi
