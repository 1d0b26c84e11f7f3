#include "isolate/default_filter.hpp"

#include "default_filter.inc"

namespace gpubox::isolate {

BpfProgram default_filter(bool refuse_memory, bool refuse_setsid) {
    const auto bytes = [](const auto& program) {
        return BpfProgram{std::string(reinterpret_cast<const char*>(program), sizeof program)};
    };
    if (refuse_memory && refuse_setsid) return bytes(kDefaultFilterBoth);
    if (refuse_memory) return bytes(kDefaultFilterMemory);
    return refuse_setsid ? bytes(kDefaultFilterSetsid) : bytes(kDefaultFilter);
}

}  // namespace gpubox::isolate
