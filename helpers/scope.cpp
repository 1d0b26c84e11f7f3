// gpubox-scope: the D-Bus half of gpubox's systemd route, a separate small program so that the
// gpubox binary itself stays fully static (a static glibc cannot load libsystemd) and only the
// runs that take this route pay for dynamic loading.
//
//   gpubox-scope user|system BUS-ADDRESS UNIT PID
//
// asks the systemd manager at BUS-ADDRESS (the user's, or the system's for root) for a transient
// scope UNIT holding process PID, with Delegate=yes, and waits for its job. gpubox execs it with
// an empty environment, stdin /dev/null and stdout and stderr one pipe; every input is an
// argument. Answers one line: "ok JOB" and exit 0, or the step, the call and the sd-bus or D-Bus
// error and exit 1 (2: bad arguments). It never touches the cgroup tree: gpubox does that.
#include <systemd/sd-bus.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace {

constexpr std::uint64_t kTimeoutUsec = 5'000'000;  // per D-Bus call, and for the job

[[noreturn]] void die(const std::string& line, int code = 1) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    std::_Exit(code);
}

// sd-bus answers -errno; a D-Bus error reply also has a name and a message.
void check(int r, const std::string& step, const std::string& call,
           const sd_bus_error* reply = nullptr) {
    if (r >= 0) return;
    if (reply && reply->name)
        die(step + ": " + call + ": " + reply->name +
            (reply->message ? std::string(": ") + reply->message : ""));
    die(step + ": " + call + ": " + std::strerror(-r));
}

std::string quote(const std::string& s) { return "\"" + s + "\""; }

std::uint64_t now_usec() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000 +
           static_cast<std::uint64_t>(ts.tv_nsec) / 1000;
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
    if (sd_bus_message_read(m, "uoss", &id, &job, &unit, &result) < 0) return 0;
    if (!w->job.empty() && w->job == job) w->done = true, w->result = result;
    return 0;
}

sd_bus* connect(const std::string& kind, const std::string& address) {
    const std::string step = "connect to the " + kind + " bus";
    sd_bus* bus = nullptr;
    check(sd_bus_new(&bus), step, "sd_bus_new");
    check(sd_bus_set_address(bus, address.c_str()), step,
          "sd_bus_set_address(" + quote(address) + ")");
    check(sd_bus_set_bus_client(bus, 1), step, "sd_bus_set_bus_client");
    check(sd_bus_start(bus), step, "sd_bus_start(" + quote(address) + ")");
    return bus;
}

std::string start_unit(sd_bus* bus, const std::string& unit, std::uint32_t pid) {
    const std::string step = "start the scope";
    const std::string call =
        "org.freedesktop.systemd1.Manager.StartTransientUnit(" + quote(unit) + ")";
    sd_bus_message* m = nullptr;
    check(sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1",
                                         "/org/freedesktop/systemd1",
                                         "org.freedesktop.systemd1.Manager", "StartTransientUnit"),
          step, call);
    const std::string description = "gpubox sandbox (monitor pid " + std::to_string(pid) + ")";
    check(sd_bus_message_append(m, "ss", unit.c_str(), "fail"), step, call);
    check(sd_bus_message_open_container(m, 'a', "(sv)"), step, call);
    check(sd_bus_message_append(m, "(sv)", "Description", "s", description.c_str()), step, call);
    check(sd_bus_message_append(m, "(sv)", "PIDs", "au", 1, pid), step, call);
    check(sd_bus_message_append(m, "(sv)", "Delegate", "b", 1), step, call);
    check(sd_bus_message_append(m, "(sv)", "CollectMode", "s", "inactive-or-failed"), step, call);
    check(sd_bus_message_close_container(m), step, call);
    check(sd_bus_message_append(m, "a(sa(sv))", 0), step, call);
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    check(sd_bus_call(bus, m, kTimeoutUsec, &error, &reply), step, call, &error);
    const char* job = nullptr;
    check(sd_bus_message_read(reply, "o", &job), step, call + ": reply");
    std::string out = job;
    sd_bus_message_unref(reply);
    sd_bus_message_unref(m);
    return out;
}

void wait_for_job(sd_bus* bus, JobWait& w) {
    const std::string step = "wait for the scope's job";
    const std::uint64_t deadline = now_usec() + kTimeoutUsec;
    while (!w.done) {
        const int r = sd_bus_process(bus, nullptr);
        check(r, step, "sd_bus_process");
        if (r > 0) continue;
        const std::uint64_t now = now_usec();
        if (now >= deadline)
            die(step + ": no org.freedesktop.systemd1.Manager.JobRemoved for " + quote(w.job) +
                " within " + std::to_string(kTimeoutUsec / 1'000'000) + " s");
        check(sd_bus_wait(bus, deadline - now), step, "sd_bus_wait");
    }
    if (w.result != "done")
        die(step + ": job " + quote(w.job) + " ended with result " + quote(w.result));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5 || (std::strcmp(argv[1], "user") != 0 && std::strcmp(argv[1], "system") != 0))
        die("usage: gpubox-scope user|system BUS-ADDRESS UNIT PID", 2);
    const std::string kind = argv[1], address = argv[2], unit = argv[3];
    char* end = nullptr;
    errno = 0;
    const unsigned long pid = std::strtoul(argv[4], &end, 10);
    if (errno || *end || pid == 0 || pid > 0x3fffffff)
        die("gpubox-scope: bad PID " + quote(argv[4]), 2);

    sd_bus* bus = connect(kind, address);
    JobWait w;
    sd_bus_slot* slot = nullptr;
    check(sd_bus_match_signal(bus, &slot, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                              "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_removed, &w),
          "subscribe to JobRemoved",
          "sd_bus_match_signal(org.freedesktop.systemd1.Manager.JobRemoved)");
    w.job = start_unit(bus, unit, static_cast<std::uint32_t>(pid));
    wait_for_job(bus, w);
    sd_bus_slot_unref(slot);
    sd_bus_flush_close_unref(bus);
    die("ok " + w.job, 0);
}
