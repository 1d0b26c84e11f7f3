#include "launcher/monitor/step.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "common/trusted_path.hpp"

namespace gpubox::launcher::step {
namespace {

constexpr const char* kWhat = "step socket";

std::string get(const Getenv& env, const char* name) {
    const char* v = env(name);
    return v ? v : "";
}

int to_int(const std::string& s, int fallback) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
        return fallback;
    return std::atoi(s.c_str());
}

// A file name from any text: what is not [A-Za-z0-9._-] becomes '_'.
std::string name_part(std::string s) {
    for (char& c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
    return s.substr(0, 80);
}

std::string step_dir_path() {
    if (const char* d = std::getenv("GPUBOX_STEP_DIR"); d && *d) return d;
    return cat("/tmp/gpubox-steps-", ::getuid());
}

// The socket's name, reached through the directory's fd: no path of any length, no rename.
sockaddr_un address(int dir, const std::string& name, socklen_t& len) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const std::string path = cat("/proc/self/fd/", dir, "/", name);
    if (path.size() >= sizeof a.sun_path) throw PlanError(cat("step socket name too long: ", name));
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
    return a;
}

UniqueFd new_socket() {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) sys::fail("socket(AF_UNIX, SOCK_SEQPACKET)", errno);
    return UniqueFd(fd);
}

// Connected to the step's keeper, or invalid where nobody listens (no socket, a stale one).
UniqueFd try_connect(int dir, const std::string& name) {
    socklen_t len = 0;
    const sockaddr_un a = address(dir, name, len);
    UniqueFd s = new_socket();
    if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&a), len) == 0) return s;
    if (errno == ECONNREFUSED || errno == ENOENT) return {};
    sys::fail(cat("connect(", quote(name), ")"), errno);
}

UniqueFd listen_at(int dir, const std::string& name) {
    socklen_t len = 0;
    const sockaddr_un a = address(dir, name, len);
    UniqueFd s = new_socket();
    if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0 ||
        ::listen(s.get(), SOMAXCONN) != 0)  // every task of a big node may wait at once
        sys::fail(cat("bind(", quote(name), ")"), errno);
    return s;
}

// The step's lock, held: a lock file that is still the one under its name (the keeper removes
// it, holding it, when the step ends).
UniqueFd lock(int dir, const std::string& name) {
    for (;;) {
        UniqueFd fd = sys::open_at(dir, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        sys::flock_exclusive(fd.get(), true, name);
        const struct stat held = sys::fstat(fd.get(), name);
        struct stat now {};
        if (sys::lstat_at(dir, name, now) && now.st_ino == held.st_ino && now.st_dev == held.st_dev)
            return fd;
    }
}

// Every fd but 0-2 and `keep` closed, 0-2 on /dev/null: the keeper holds nothing of the task's
// (srun's pipes, PMI_FD) and outlives none of it.
void detach_fds(const std::vector<int>& keep) {
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3 && null >= 0; ++i) ::dup2(null, i);
    unsigned from = 3;
    for (int k : keep) {
        if (static_cast<unsigned>(k) > from) ::syscall(SYS_close_range, from, k - 1, 0);
        from = static_cast<unsigned>(k) + 1;
    }
    ::syscall(SYS_close_range, from, ~0U, 0);
}

void send_or_drop(int sock, std::string_view bytes, int fd) {
    try {
        sys::send_frame(sock, bytes, fd, kWhat);
    } catch (const SysError&) {}  // that task is gone already
}

// The keeper: make the sandbox, then serve the tasks until the last one leaves.
[[noreturn]] void keeper(UniqueFd listener, UniqueFd dir, const std::string& name,
                         const std::string& asks, const std::function<Made()>& make) {
    for (int s : {SIGHUP, SIGINT, SIGTERM, SIGQUIT, SIGUSR1, SIGUSR2}) sys::ignore_signal(s);
    Made made;
    try {
        made = make();
    } catch (...) {
        made.failure = describe(std::current_exception());
        if (std::string h = hint_for(std::current_exception()); !h.empty())
            made.failure += "\n" + h;
    }
    std::vector<UniqueFd> members;
    bool served = false;
    while (made.failure.empty()) {
        std::vector<pollfd> p{{listener.get(), POLLIN, 0}, {made.init.pidfd.get(), POLLIN, 0}};
        for (const UniqueFd& m : members) p.push_back({m.get(), POLLIN, 0});
        sys::poll(p.data(), p.size(), -1);
        if (p[1].revents) break;  // init died: the tasks' processes with it
        if (p[0].revents & POLLIN) {
            UniqueFd m(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
            if (!m.valid()) continue;
            send_or_drop(m.get(), "R" + asks, made.init.pidfd.get());
            send_or_drop(m.get(), "H", made.holder.get());
            members.push_back(std::move(m));
            served = true;
            continue;
        }
        for (std::size_t i = members.size(); i-- > 0;)
            if (p[i + 2].revents) members.erase(members.begin() + static_cast<long>(i));
        if (!served || !members.empty()) continue;
        // The last one left. Under the lock, unless a task connected meanwhile, the step ends.
        const UniqueFd held = lock(dir.get(), name + ".lock");
        pollfd l{listener.get(), POLLIN, 0};
        if (sys::poll(&l, 1, 0) == 0) break;
    }
    {
        // The names go under the lock, so that the next task makes a new sandbox; a task that
        // waits now hears why there is none (or sees EOF, and tries again).
        const UniqueFd held = lock(dir.get(), name + ".lock");
        for (pollfd l{listener.get(), POLLIN, 0};
             !made.failure.empty() && sys::poll(&l, 1, 0) > 0;) {
            UniqueFd m(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
            if (!m.valid()) break;
            send_or_drop(m.get(), "F" + made.failure, -1);
        }
        sys::try_unlink_at(dir.get(), name + ".sock");
        sys::try_unlink_at(dir.get(), name + ".lock");
    }
    listener.reset();
    if (made.init.pid > 0) {
        sys::send_signal(made.init.pid, SIGKILL);  // its pid namespace: the holder, every task
        int status = 0;
        ::waitpid(made.init.pid, &status, 0);
    }
    sys::exit_now(0);
}

// Double-forked, so that it is nobody's child here and in a session of its own.
void start_keeper(UniqueFd listener, UniqueFd dir, const std::string& name, const std::string& asks,
                  const std::function<Made()>& make) {
    std::fflush(nullptr);
    const pid_t middle = ::fork();
    if (middle < 0) sys::fail("fork(the step's keeper)", errno);
    if (middle == 0) {
        ::setsid();
        const pid_t k = ::fork();
        if (k == 0) {
            std::vector<int> keep{listener.get(), dir.get()};
            if (keep[0] > keep[1]) std::swap(keep[0], keep[1]);
            detach_fds(keep);
            keeper(std::move(listener), std::move(dir), name, asks, make);
        }
        sys::exit_now(k < 0 ? 1 : 0);
    }
    int status = 0;
    ::waitpid(middle, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw SetupError("fork(the step's keeper) failed");
}

// The keeper's answer: the sandbox to join (and what its maker asked of it, `asks`), or why
// there is none. False: it went without one.
bool receive_answer(Member& m, std::string& asks) {
    std::string bytes;
    UniqueFd fd;
    if (!sys::recv_frame(m.conn.get(), bytes, fd, kWhat)) return false;
    if (!bytes.empty() && bytes[0] == 'F') {
        const std::string text = bytes.substr(1);
        const auto nl = text.find('\n');
        throw PlanError(cat("step mode: ", text.substr(0, nl)),
                        nl == std::string::npos ? "" : text.substr(nl + 1));
    }
    if (bytes.empty() || bytes[0] != 'R' || !fd.valid()) return false;
    asks = bytes.substr(1);
    m.init = std::move(fd);
    if (!sys::recv_frame(m.conn.get(), bytes, fd, kWhat) || bytes != "H" || !fd.valid())
        return false;
    m.holder = std::move(fd);
    return true;
}

}  // namespace

int tasks_on_node(const std::string& tasks_per_node, int node_id) {
    int node = 0;
    std::size_t pos = 0;
    while (pos < tasks_per_node.size()) {
        std::size_t end = tasks_per_node.find(',', pos);
        if (end == std::string::npos) end = tasks_per_node.size();
        const std::string item = tasks_per_node.substr(pos, end - pos);
        pos = end + 1;
        const auto paren = item.find("(x");
        const int count = to_int(item.substr(0, paren), -1);
        int times = 1;
        if (paren != std::string::npos) {
            if (item.back() != ')') return 0;
            times = to_int(item.substr(paren + 2, item.size() - paren - 3), -1);
        }
        if (count < 0 || times < 0) return 0;
        if (node_id < node + times) return count;
        node += times;
    }
    return 0;
}

std::string first_host(const std::string& nodelist) {
    const std::size_t stop = nodelist.find_first_of(",[");
    if (stop == std::string::npos || nodelist[stop] == ',') return nodelist.substr(0, stop);
    const std::size_t range_end = nodelist.find_first_of("-,]", stop + 1);
    if (range_end == std::string::npos) return "";
    return nodelist.substr(0, stop) + nodelist.substr(stop + 1, range_end - stop - 1);
}

Info inspect(const Getenv& env) {
    Info i;
    const int node = to_int(get(env, "SLURM_NODEID"), 0);
    i.local_tasks = tasks_on_node(get(env, "SLURM_STEP_TASKS_PER_NODE"), node);
    for (const char* v : {"PMIX_RANK", "PMI_FD", "PMI_RANK"})
        if (env(v)) {
            i.pmi = v;
            break;
        }
    std::string host = get(env, "SLURMD_NODENAME");
    if (host.empty()) {
        char h[256] = "";
        ::gethostname(h, sizeof h - 1);
        host = h;
    }
    const std::string job = get(env, "SLURM_JOB_ID"), step = get(env, "SLURM_STEP_ID");
    if (!job.empty() && !step.empty())
        i.key = cat("slurm-", name_part(job), ".", name_part(step), "-", name_part(host));
    else if (const std::string ns = get(env, "PMIX_NAMESPACE"); !ns.empty())
        i.key = cat("pmix-", name_part(ns), "-", name_part(host));
    return i;
}

std::vector<std::pair<std::string, std::string>> environment(char** envp) {
    static const char* const kPrefixes[] = {"SLURM_", "PMIX_", "PMI_",   "OMPI_",
                                            "UCX_",   "NCCL_", "MPICH_", "I_MPI_"};
    std::vector<std::pair<std::string, std::string>> out;
    for (char** e = envp; e && *e; ++e) {
        const std::string kv = *e;
        const auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0) continue;
        for (const char* p : kPrefixes)
            if (kv.compare(0, std::strlen(p), p) == 0) {
                out.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
                break;
            }
    }
    auto has = [&](const char* name) { return std::getenv(name) != nullptr; };
    auto val = [](const char* name) -> std::string {
        const char* v = std::getenv(name);
        return v ? v : "";
    };
    auto derive = [&](const char* name, const std::string& value) {
        if (!has(name) && !value.empty()) out.emplace_back(name, value);
    };
    derive("RANK", val("SLURM_PROCID"));
    derive("LOCAL_RANK", val("SLURM_LOCALID"));
    derive("WORLD_SIZE", val("SLURM_NTASKS"));
    const int local =
        tasks_on_node(val("SLURM_STEP_TASKS_PER_NODE"), to_int(val("SLURM_NODEID"), 0));
    derive("LOCAL_WORLD_SIZE", local > 0 ? std::to_string(local) : "");
    std::string nodes = val("SLURM_STEP_NODELIST");
    if (nodes.empty()) nodes = val("SLURM_JOB_NODELIST");
    derive("MASTER_ADDR", first_host(nodes));
    const int job = to_int(val("SLURM_JOB_ID"), -1);
    derive("MASTER_PORT", job >= 0 ? std::to_string(49152 + job % 16384) : "");  // as enroot's hook
    return out;
}

std::string difference(const std::string& mine, const std::string& sandbox) {
    auto lines = [](const std::string& text) {
        std::vector<std::pair<std::string, std::string>> out;
        std::size_t pos = 0;
        while (pos < text.size()) {
            std::size_t end = text.find('\n', pos);
            if (end == std::string::npos) end = text.size();
            const std::string line = text.substr(pos, end - pos);
            const auto tab = line.find('\t');
            out.emplace_back(line.substr(0, tab),
                             tab == std::string::npos ? "" : line.substr(tab + 1));
            pos = end + 1;
        }
        return out;
    };
    const auto a = lines(mine), b = lines(sandbox);
    for (const auto& [what, value] : a) {
        std::string theirs = "nothing";
        for (const auto& [w, v] : b)
            if (w == what) theirs = v;
        if (theirs != value)
            return cat("this task asks for ", what, " ", value,
                       ", the step's sandbox on this node has ", what, " ", theirs);
    }
    for (const auto& [what, value] : b) {
        bool asked = false;
        for (const auto& [w, v] : a) asked = asked || w == what;
        if (!asked)
            return cat("this task asks for no ", what, ", the step's sandbox on this node has ",
                       what, " ", value);
    }
    return "";
}

Member join(const std::string& key, const std::string& asks, const std::function<Made()>& make) {
    UniqueFd dir = trusted_path::open_state_dir(
        step_dir_path(), trusted_path::Missing::create, "step directory",
        "set GPUBOX_STEP_DIR to a directory of your own that only you can write, on this node");
    const std::string name = "step-" + key;
    for (int attempt = 0; attempt < 20; ++attempt) {
        Member m;
        {
            const UniqueFd held = lock(dir.get(), name + ".lock");
            m.conn = try_connect(dir.get(), name + ".sock");
            if (!m.conn.valid()) {  // none yet, or a stale one: ours to make
                sys::try_unlink_at(dir.get(), name + ".sock");
                UniqueFd listener = listen_at(dir.get(), name + ".sock");
                m.conn = try_connect(dir.get(), name + ".sock");  // queued until it is ready
                if (!m.conn.valid()) throw SetupError("the step's socket refused its maker");
                start_keeper(std::move(listener), sys::dup_cloexec(dir.get()), name, asks, make);
            }
        }  // unlocked: the keeper answers once the sandbox is set up
        ucred peer{};
        socklen_t len = sizeof peer;
        if (::getsockopt(m.conn.get(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
            peer.uid != ::getuid())
            throw PlanError(
                cat("step mode: the socket ", quote(name + ".sock"), " is not the caller's own"));
        std::string theirs;
        if (!receive_answer(m, theirs)) continue;
        if (const std::string d = difference(asks, theirs); !d.empty())
            throw PlanError(cat("step mode: ", d),
                            "the tasks of one step on a node share one sandbox, made once: start "
                            "them with the same options (srun does), or give each its own with "
                            "--no-step");
        return m;
    }
    throw SetupError(cat("step mode: the sandbox of ", key, " kept going away while joining it"));
}

}  // namespace gpubox::launcher::step
