#include "common/print.hpp"

#include <unistd.h>

#include "common/sys.hpp"

namespace gpubox {

// Best effort: nowhere to report a failed write of a report (a closed pipe, a full disk).
void print(std::string_view text) { sys::try_write_all(STDOUT_FILENO, text); }
void print_err(std::string_view text) { sys::try_write_all(STDERR_FILENO, text); }

}  // namespace gpubox
