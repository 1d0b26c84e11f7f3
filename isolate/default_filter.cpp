#include "isolate/default_filter.hpp"

#include "default_filter.inc"

namespace gpubox::isolate {

BpfProgram default_filter() {
    return BpfProgram{
        std::string(reinterpret_cast<const char*>(kDefaultFilter), sizeof kDefaultFilter)};
}

}  // namespace gpubox::isolate
