#pragma once
#include "isolate/seccomp.hpp"

namespace gpubox::isolate {

// default_seccomp_policy(), compiled at build time by the same libseccomp code (a unit test
// checks the two never drift apart).
BpfProgram default_filter();

}  // namespace gpubox::isolate
