#pragma once
// Step mode's plan (launcher/monitor/step.hpp is its rendezvous): whether a run joins its step's
// sandbox, and the options a step's task runs with.
#include <optional>
#include <string>

#include "launcher/cli/options.hpp"

namespace gpubox::launcher {

// Step mode's options: the host's network and name, the wire-up's variables (--env wins),
// PMIx's server directory bound read-write, PMI_FD kept open, and the submit directory (the
// caller's working directory) bound at its own path and made the working directory.
Options step_options(const Options& given);

// Whether this run joins its step's sandbox: --step, --no-step, else the environment; the key
// that names the step's sandbox on this node, or nullopt.
std::optional<std::string> decide_step(const Options& o);

}  // namespace gpubox::launcher
