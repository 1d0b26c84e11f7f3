#pragma once
#include <string>

namespace gpubox::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

void set_level(Level level);
Level level();
// One line "gpubox: <prefix><text>" written with a single write(2), so it is fork-safe and lines
// from the monitor and the sandbox's init never interleave mid-line.
void error(const std::string& text);
void hint(const std::string& text);
void warn(const std::string& text);
void info(const std::string& text);
void debug(const std::string& text);

}  // namespace gpubox::log
