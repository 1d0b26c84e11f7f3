#include "isolate/systemd_scope.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "isolate/cgroup_plan.hpp"

namespace gpubox::isolate {
namespace {

constexpr std::uint64_t kTimeoutUsec = 5'000'000;  // per D-Bus call, and for the job

// The few sd-bus calls we make, resolved from libsystemd.so.0 at first use. Only the headers
// come from libsystemd-dev: the binary does not link against libsystemd.
struct SdBus {
    decltype(&::sd_bus_new) bus_new;
    decltype(&::sd_bus_set_address) set_address;
    decltype(&::sd_bus_set_bus_client) set_bus_client;
    decltype(&::sd_bus_start) start;
    decltype(&::sd_bus_flush_close_unref) flush_close_unref;
    decltype(&::sd_bus_match_signal) match_signal;
    decltype(&::sd_bus_slot_unref) slot_unref;
    decltype(&::sd_bus_message_new_method_call) new_method_call;
    decltype(&::sd_bus_message_append) append;
    decltype(&::sd_bus_message_open_container) open_container;
    decltype(&::sd_bus_message_close_container) close_container;
    decltype(&::sd_bus_message_read) read;
    decltype(&::sd_bus_message_unref) message_unref;
    decltype(&::sd_bus_call) call;
    decltype(&::sd_bus_process) process;
    decltype(&::sd_bus_wait) wait;
    decltype(&::sd_bus_error_free) error_free;
};

template <typename F>
void resolve(void* lib, F& fn, const char* name) {
    void* sym = ::dlsym(lib, name);
    if (!sym) throw SetupError(cat("dlsym(\"libsystemd.so.0\", ", quote(name), "): ", ::dlerror()));
    fn = reinterpret_cast<F>(sym);
}

const SdBus& sd() {
    static SdBus api;
    static bool loaded = false;
    if (loaded) return api;
    // Kept loaded: libsystemd is not meant to be unloaded.
    void* lib = ::dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw SetupError(cat("dlopen(\"libsystemd.so.0\"): ", ::dlerror()));
    resolve(lib, api.bus_new, "sd_bus_new");
    resolve(lib, api.set_address, "sd_bus_set_address");
    resolve(lib, api.set_bus_client, "sd_bus_set_bus_client");
    resolve(lib, api.start, "sd_bus_start");
    resolve(lib, api.flush_close_unref, "sd_bus_flush_close_unref");
    resolve(lib, api.match_signal, "sd_bus_match_signal");
    resolve(lib, api.slot_unref, "sd_bus_slot_unref");
    resolve(lib, api.new_method_call, "sd_bus_message_new_method_call");
    resolve(lib, api.append, "sd_bus_message_append");
    resolve(lib, api.open_container, "sd_bus_message_open_container");
    resolve(lib, api.close_container, "sd_bus_message_close_container");
    resolve(lib, api.read, "sd_bus_message_read");
    resolve(lib, api.message_unref, "sd_bus_message_unref");
    resolve(lib, api.call, "sd_bus_call");
    resolve(lib, api.process, "sd_bus_process");
    resolve(lib, api.wait, "sd_bus_wait");
    resolve(lib, api.error_free, "sd_bus_error_free");
    loaded = true;
    return api;
}

struct BusUnref {
    void operator()(sd_bus* b) const { sd().flush_close_unref(b); }
};
struct SlotUnref {
    void operator()(sd_bus_slot* s) const { sd().slot_unref(s); }
};
struct MessageUnref {
    void operator()(sd_bus_message* m) const { sd().message_unref(m); }
};
using Bus = std::unique_ptr<sd_bus, BusUnref>;
using Slot = std::unique_ptr<sd_bus_slot, SlotUnref>;
using Message = std::unique_ptr<sd_bus_message, MessageUnref>;

struct BusError {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    ~BusError() { sd().error_free(&e); }
};

// sd-bus answers -errno; a D-Bus error reply also has a name and a message.
void check(int r, const std::string& op, const sd_bus_error* reply = nullptr) {
    if (r >= 0) return;
    if (reply && reply->name)
        throw SetupError(cat(op, ": ", reply->name, reply->message ? cat(": ", reply->message) : ""));
    sys::fail(op, -r);
}

// Runs one step; any failure is nested under the step's name.
template <typename F>
auto step(const char* name, F&& f) {
    try {
        return f();
    } catch (...) {
        std::throw_with_nested(SetupError(name));
    }
}

// The caller's systemd: the user manager's bus, or for uid 0 the system bus. An address we
// build ourselves (not sd_bus_open_user()), so that it works without XDG_RUNTIME_DIR, and so
// that a missing socket is found before libsystemd is loaded at all.
std::string bus_address(bool system) {
    const char* env = std::getenv(system ? "DBUS_SYSTEM_BUS_ADDRESS" : "DBUS_SESSION_BUS_ADDRESS");
    if (env && *env) return env;
    if (system) return "unix:path=/run/dbus/system_bus_socket";
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    return cat("unix:path=", runtime && *runtime ? std::string(runtime) : cat("/run/user/", ::getuid()), "/bus");
}

Bus connect(bool system) {
    const std::string address = bus_address(system);
    if (starts_with(address, "unix:path=") && address.find(',') == std::string::npos) {
        const std::string socket = address.substr(10);
        struct stat st {};
        if (!sys::lstat_at(AT_FDCWD, socket, st))
            throw SetupError(cat("no bus socket ", quote(socket),
                                 system ? "" : cat(" (no systemd user manager for uid ", ::getuid(), ")")));
    }
    const SdBus& api = sd();
    sd_bus* raw = nullptr;
    check(api.bus_new(&raw), "sd_bus_new");
    Bus bus(raw);
    check(api.set_address(bus.get(), address.c_str()), cat("sd_bus_set_address(", quote(address), ")"));
    check(api.set_bus_client(bus.get(), 1), "sd_bus_set_bus_client");
    check(api.start(bus.get()), cat("sd_bus_start(", quote(address), ")"));
    return bus;
}

struct JobWait {
    std::string job;  // object path, known once StartTransientUnit answered
    std::string result;
    bool done = false;
};

int on_job_removed(sd_bus_message* m, void* data, sd_bus_error*) {
    auto* w = static_cast<JobWait*>(data);
    std::uint32_t id = 0;
    const char *job = nullptr, *unit = nullptr, *result = nullptr;
    if (sd().read(m, "uoss", &id, &job, &unit, &result) < 0) return 0;
    if (!w->job.empty() && w->job == job) w->done = true, w->result = result;
    return 0;
}

std::string start_unit(sd_bus* bus, const std::string& unit) {
    const SdBus& api = sd();
    const std::string op = cat("org.freedesktop.systemd1.Manager.StartTransientUnit(", quote(unit), ")");
    sd_bus_message* raw = nullptr;
    check(api.new_method_call(bus, &raw, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                              "org.freedesktop.systemd1.Manager", "StartTransientUnit"), op);
    Message m(raw);
    const std::string description = cat("gpubox sandbox (monitor pid ", ::getpid(), ")");
    check(api.append(m.get(), "ss", unit.c_str(), "fail"), op);
    check(api.open_container(m.get(), 'a', "(sv)"), op);
    check(api.append(m.get(), "(sv)", "Description", "s", description.c_str()), op);
    check(api.append(m.get(), "(sv)", "PIDs", "au", 1, static_cast<std::uint32_t>(::getpid())), op);
    check(api.append(m.get(), "(sv)", "Delegate", "b", 1), op);
    check(api.append(m.get(), "(sv)", "CollectMode", "s", "inactive-or-failed"), op);
    check(api.close_container(m.get()), op);
    check(api.append(m.get(), "a(sa(sv))", 0), op);
    BusError error;
    sd_bus_message* reply_raw = nullptr;
    check(api.call(bus, m.get(), kTimeoutUsec, &error.e, &reply_raw), op, &error.e);
    Message reply(reply_raw);
    const char* job = nullptr;
    check(api.read(reply.get(), "o", &job), op + ": reply");
    return job;
}

void wait_for_job(sd_bus* bus, JobWait& w) {
    const SdBus& api = sd();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(kTimeoutUsec);
    while (!w.done) {
        const int r = api.process(bus, nullptr);
        check(r, "sd_bus_process");
        if (r > 0) continue;
        const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            throw SetupError(cat("no org.freedesktop.systemd1.Manager.JobRemoved for ", quote(w.job), " within ",
                                 kTimeoutUsec / 1'000'000, " s"));
        check(api.wait(bus, static_cast<std::uint64_t>(left.count())), "sd_bus_wait");
    }
    if (w.result != "done") throw SetupError(cat("job ", quote(w.job), " ended with result ", quote(w.result)));
}

}  // namespace

SystemdScope enter_systemd_scope(const std::string& cgroup_mount, const std::string& unit) {
    const bool system = ::geteuid() == 0;
    SystemdScope scope;
    scope.unit = unit;
    {
        Bus bus = step(system ? "connect to the system bus" : "connect to the user bus", [&] { return connect(system); });
        JobWait w;
        sd_bus_slot* slot_raw = nullptr;
        step("subscribe to JobRemoved", [&] {
            check(sd().match_signal(bus.get(), &slot_raw, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                    "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_removed, &w),
                  "sd_bus_match_signal(org.freedesktop.systemd1.Manager.JobRemoved)");
        });
        Slot slot(slot_raw);
        w.job = step("start the scope", [&] { return start_unit(bus.get(), unit); });
        step("wait for the scope's job", [&] { wait_for_job(bus.get(), w); });
    }
    scope.dir = step("find the scope's cgroup", [&] {
        const std::string self = sys::read_file("/proc/self/cgroup");
        const auto path = parse_proc_cgroup(self);
        if (!path || !cgroup_is_unit(*path, unit))
            throw SetupError(cat("/proc/self/cgroup names ", quote(path ? *path : self), ", not the scope"));
        return cgroup_mount + *path;
    });
    step("move gpubox into the scope's leaf cgroup", [&] {
        UniqueFd dir = sys::open_at(AT_FDCWD, scope.dir, O_PATH | O_DIRECTORY);
        sys::mkdir_at(dir.get(), "monitor", 0755);
        sys::write_file(scope.dir + "/monitor/cgroup.procs", "0");
    });
    step("enable the scope's controllers for its children", [&] {
        const std::string offered = sys::read_file(scope.dir + "/cgroup.controllers");
        const auto words = plan_subtree_control(offered, {"cpu", "memory", "pids"});
        if (!words.empty()) sys::write_file(scope.dir + "/cgroup.subtree_control", join(words, " "));
        for (const std::string& w : words) scope.controllers.push_back(w.substr(1));
    });
    return scope;
}

}  // namespace gpubox::isolate
