#pragma once
#include "isolate/seccomp.hpp"

namespace gpubox::isolate {

// default_seccomp_policy(), compiled at build time by the same libseccomp code (a unit test
// checks the two never drift apart); with the limits' refusals where asked
// (with_limit_refusals): compiled in, not folded on (isolate::fold), so that the kernel still
// finds each call it allows outright in a few steps of the tree. Attaching a filter it runs the
// program once for every call number to fill its cache of those, and the folded refusals' list
// behind each of the tree's allows made seccomp() ~50 us slower (bench/README.md).
BpfProgram default_filter(bool refuse_memory = false, bool refuse_setsid = false);

}  // namespace gpubox::isolate
