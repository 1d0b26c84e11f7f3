#pragma once
// A transient systemd scope with Delegate=yes for the monitor, asked of the caller's own systemd
// over D-Bus, as rootless podman and crun do: on a systemd host with cgroup v2 this is how an
// unprivileged user gets a cgroup of their own. The D-Bus half is our helper gpubox-scope
// (helpers/scope.cpp), the one program of ours linked against libsystemd, so that gpubox stays static and
// runs where libsystemd is missing; the cgroup half is here. Monitor side only.
#include <string>
#include <vector>

namespace gpubox::isolate {

struct SystemdScope {
    std::string unit;                      // gpubox-<pid>-<random>.scope
    std::string dir;                       // its cgroup directory, below the cgroup2 mount
    std::vector<std::string> controllers;  // enabled in its cgroup.subtree_control
};

// Starts the scope holding this process (the user's systemd; the system's for uid 0) by running
// gpubox-scope, found beside this binary (then in ../libexec/gpubox/), with an empty environment,
// moves this process into the scope's leaf "monitor" (cgroup v2 lets only leaves hold processes)
// and enables those of cpu, memory and pids the scope was given for its children. `cgroup_mount`
// is the cgroup2 mount point. Throws a SetupError naming the step, the call and the error, e.g.
// `connect to the user bus: sd_bus_start("unix:path=/run/user/1000/bus"): Connection refused`.
SystemdScope enter_systemd_scope(const std::string& cgroup_mount, const std::string& unit);

// Why the caller's systemd cannot be asked, without a connect, a helper or an exception: its bus
// socket is absent ("connect to the user bus: no bus socket ..."); "" where it may be. The
// common case of a host without a user manager costs one lstat, not a failed route's unwinding.
std::string systemd_bus_missing();

}  // namespace gpubox::isolate
