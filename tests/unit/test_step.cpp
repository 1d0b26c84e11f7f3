// Step mode's pure parts (launcher/step.hpp): Slurm's tasks-per-node and host-list forms, what
// the environment says about the step, and the variables a step's workloads get.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "launcher/monitor/step.hpp"

using namespace gpubox::launcher;

namespace {

step::Getenv from(const std::map<std::string, std::string>& vars) {
    return [vars](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    };
}

}  // namespace

TEST_CASE("step: SLURM_STEP_TASKS_PER_NODE, per node") {
    CHECK(step::tasks_on_node("4", 0) == 4);
    CHECK(step::tasks_on_node("2(x3),1", 0) == 2);
    CHECK(step::tasks_on_node("2(x3),1", 2) == 2);
    CHECK(step::tasks_on_node("2(x3),1", 3) == 1);
    CHECK(step::tasks_on_node("2(x3),1", 4) == 0);
    CHECK(step::tasks_on_node("", 0) == 0);
    CHECK(step::tasks_on_node("x(x2)", 0) == 0);
    CHECK(step::tasks_on_node("2(x2", 0) == 0);
}

TEST_CASE("step: the first host of a Slurm host list") {
    CHECK(step::first_host("node7") == "node7");
    CHECK(step::first_host("gpu[03-04,07],cpu1") == "gpu03");
    CHECK(step::first_host("a,b") == "a");
    CHECK(step::first_host("gpu[12]") == "gpu12");
    CHECK(step::first_host("") == "");
}

TEST_CASE("step: what the environment says") {
    auto i = step::inspect(from({{"SLURM_JOB_ID", "12"},
                                 {"SLURM_STEP_ID", "0"},
                                 {"SLURMD_NODENAME", "n/1"},
                                 {"SLURM_NODEID", "1"},
                                 {"SLURM_STEP_TASKS_PER_NODE", "1,3"}}));
    CHECK(i.local_tasks == 3);
    CHECK(i.pmi.empty());
    CHECK(i.wants_step());
    CHECK(i.key == "slurm-12.0-n_1");  // no '/' reaches a file name
    // One task on this node and no PMI: a private sandbox, as before.
    i = step::inspect(from({{"SLURM_JOB_ID", "12"},
                            {"SLURM_STEP_ID", "0"},
                            {"SLURM_NODEID", "0"},
                            {"SLURM_STEP_TASKS_PER_NODE", "1,3"}}));
    CHECK_FALSE(i.wants_step());
    // A PMI wire-up alone (mpirun, or srun -n 1 --mpi=pmix) asks for it too.
    i = step::inspect(from({{"PMIX_RANK", "0"}, {"PMIX_NAMESPACE", "prterun-x-1@1"}}));
    CHECK(i.pmi == "PMIX_RANK");
    CHECK(i.wants_step());
    CHECK(i.key.rfind("pmix-prterun-x-1_1-", 0) == 0);
    i = step::inspect(from({{"PMI_FD", "5"}}));
    CHECK(i.pmi == "PMI_FD");
    CHECK(i.key.empty());  // nothing names the step: --step refuses
}
