#pragma once
// Step mode: the tasks of one Slurm job step (or one PMI wire-up) on a node share one sandbox, as
// MPI's and NCCL's intra-node transports need (one pid and IPC namespace, one /dev/shm, the
// host's network, one user namespace for the kernel's ptrace-mode checks).
//
// The first task makes it; the others join it; the last one out tears it down. The sandbox's
// init is the child of a keeper: a process of its own (double-forked off the first task's
// gpubox, with no stdio) that holds a listening socket in the caller's step directory and
// counts the tasks connected to it. Each task's gpubox stays connected while it runs; when the
// last connection closes (exit, kill -9, scancel), the keeper kills init, so the whole pid
// namespace goes, and removes its socket. Its death kills init too (PR_SET_PDEATHSIG).
//
// The rendezvous: GPUBOX_STEP_DIR (default /tmp/gpubox-steps-UID), opened as a state directory
// of the caller's own (common/trusted_path.hpp: nobody else can plant or replace anything in
// it), with a lock file and a socket per step, named by job id, step id and node. Every task
// takes the lock, connects, and only where nothing answers (none yet, or a stale socket of a
// keeper that died: a recycled job id, a first task killed during setup) removes the name and
// makes the sandbox; the keeper removes both names under the same lock, so a task that locks a
// lock file no longer linked tries again.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/unique_fd.hpp"
#include "isolate/spawn.hpp"

namespace gpubox::launcher::step {

using Getenv = std::function<const char*(const char*)>;

// What the environment says about this task's step.
struct Info {
    int local_tasks = 0;  // the step's tasks on this node (SLURM_STEP_TASKS_PER_NODE), 0: none
    std::string pmi;      // the PMI variable that is set (PMIX_RANK, PMI_FD, PMI_RANK), or ""
    std::string key;      // names the step's sandbox on this node; "" where nothing names one
    bool wants_step() const { return local_tasks > 1 || !pmi.empty(); }
};
Info inspect(const Getenv& env);

// Pure: the count for node `node_id` in Slurm's "2(x3),1" form; 0 where it says nothing.
int tasks_on_node(const std::string& tasks_per_node, int node_id);
// Pure: the first host of a Slurm host list ("gpu[03-04,07],cpu1" -> "gpu03").
std::string first_host(const std::string& nodelist);
// The variables a step's workloads get from the caller's environment `envp`: Slurm's, PMI's
// and the MPI, UCX and NCCL tuning ones, and, where not set, those torchrun's processes expect
// (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) from Slurm's.
std::vector<std::pair<std::string, std::string>> environment(char** envp);

// What the keeper's `make` returns: the running sandbox, or why there is none (the message, a
// hint line after '\n').
struct Made {
    isolate::Spawned init;
    UniqueFd holder;
    std::string failure;
};
// A task's membership: connected while it runs; the sandbox's init and holder, to join.
struct Member {
    UniqueFd conn, init, holder;
};
// Pure: what a task asks of the step's sandbox is one "WHAT\tVALUE" line each (step_plan.cpp's
// step_asks); the first WHAT whose VALUE differs between this task's and the sandbox's, as
// "this task asks for WHAT VALUE, the step's sandbox on this node has WHAT VALUE", or "".
std::string difference(const std::string& mine, const std::string& sandbox);
// Join the sandbox of step `key`, making it first where none runs (`make` runs in the keeper).
// `asks`: what this task asks of the sandbox; the keeper answers with what its maker asked,
// and a task whose asks differ is refused (PlanError, one line): a sandbox is made once.
Member join(const std::string& key, const std::string& asks, const std::function<Made()>& make);

}  // namespace gpubox::launcher::step
