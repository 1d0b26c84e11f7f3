#include "common/print.hpp"

#include <unistd.h>

#include <cerrno>

namespace gpubox {
namespace {

void write_whole(int fd, std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

}  // namespace

void print(std::string_view text) { write_whole(STDOUT_FILENO, text); }
void print_err(std::string_view text) { write_whole(STDERR_FILENO, text); }

}  // namespace gpubox
