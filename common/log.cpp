#include "common/log.hpp"

#include "common/print.hpp"

namespace gpubox::log {
namespace {

Level g_level = Level::warn;

void emit(Level at, const char* prefix, const std::string& text) {
    if (at > g_level) return;
    std::string line = std::string("gpubox: ") + prefix + text;
    for (char& c : line)
        if (c == '\n') c = ' ';  // one event, one line
    line += '\n';
    print_err(line);
}

}  // namespace

void set_level(Level l) { g_level = l; }
Level level() { return g_level; }
void error(const std::string& t) { emit(Level::error, "", t); }
void hint(const std::string& t) { emit(Level::error, "hint: ", t); }
void warn(const std::string& t) { emit(Level::warn, "warning: ", t); }
void info(const std::string& t) { emit(Level::info, "", t); }
void debug(const std::string& t) { emit(Level::debug, "debug: ", t); }

}  // namespace gpubox::log
