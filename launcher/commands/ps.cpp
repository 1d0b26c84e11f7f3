// gpubox ps: the caller's running named sandboxes (launcher/monitor/named.hpp).
#include <algorithm>
#include <ctime>

#include "common/print.hpp"
#include "common/text.hpp"
#include "launcher/commands/commands.hpp"
#include "launcher/monitor/named.hpp"

namespace gpubox::launcher {
namespace {

std::string uptime(std::int64_t s) {
    if (s < 0) s = 0;
    if (s < 120) return cat(s, "s");
    if (s < 7200) return cat(s / 60, "m");
    if (s < 2 * 86400) return cat(s / 3600, "h", (s % 3600) / 60, "m");
    return cat(s / 86400, "d", (s % 86400) / 3600, "h");
}

// Every column is as wide as its widest cell, header included, plus two spaces.
std::string pad(const std::string& s, std::size_t w) {
    return s + std::string(w > s.size() ? w - s.size() : 1, ' ');
}

}  // namespace

int ps_command(const Options& o) {
    const std::vector<named::Entry> all = named::list();
    const std::int64_t now = std::time(nullptr);
    if (o.json) {
        print(named::render_json(all, now));
        return 0;
    }
    std::size_t wn = 6, wi = 7, wg = 6, wl = 8;
    for (const named::Entry& e : all) {
        wn = std::max(wn, e.name.size() + 2), wi = std::max(wi, e.rootfs.size() + 2);
        wg = std::max(wg, e.gpus.size() + 2), wl = std::max(wl, e.limits.size() + 2);
    }
    std::string table = cat(pad("NAME", wn), pad("PID", 9), pad("IMAGE", wi), pad("GPUS", wg),
                            pad("LIMITS", wl), "UPTIME\n");
    for (const named::Entry& e : all)
        table +=
            cat(pad(e.name, wn), pad(std::to_string(e.pid), 9), pad(e.rootfs, wi), pad(e.gpus, wg),
                pad(e.limits.empty() ? "-" : e.limits, wl), uptime(now - e.started), "\n");
    print(table);
    return 0;
}

}  // namespace gpubox::launcher
