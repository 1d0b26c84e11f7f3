#include "launcher/monitor/nvml.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/nvml_report.hpp"
#include "image/tool.hpp"

namespace gpubox::launcher {
namespace {

// The driver's own libnvidia-ml.so.1, as discovery resolved it under the driver root.
std::string nvml_library(const gpu::GpuInventory& inv) {
    for (const gpu::DriverLib& l : inv.libs)
        if (std::find(l.sonames.begin(), l.sonames.end(), "libnvidia-ml.so.1") != l.sonames.end())
            return l.host_path;
    return "";
}

}  // namespace

void add_nvml_facts(gpu::GpuInventory& inv, const std::string& driver_root) {
    if (std::none_of(inv.gpus.begin(), inv.gpus.end(),
                     [](const gpu::Gpu& g) { return g.vendor == gpu::Vendor::nvidia; }))
        return;
    std::string lib = nvml_library(inv);
    if (lib.empty() && !(inv.libs.empty() && !inv.ldcache_problem.empty()))  // not asked for
        lib = nvml_library(gpu::discover_gpus(driver_root, gpu::kCapUtility, gpu::Scope::nvidia));
    if (lib.empty()) {
        inv.nvml_problem = "no libnvidia-ml.so.1 of the driver's version in ld.so.cache";
        return;
    }
    try {
        // Its code runs as the caller: only a library root or the caller could have written.
        const UniqueFd fd = sys::open_at(AT_FDCWD, lib, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        const struct stat st = sys::fstat(fd.get(), lib);
        if (!S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != ::getuid()) ||
            (st.st_mode & (S_IWGRP | S_IWOTH))) {
            inv.nvml_problem = cat(quote(lib),
                                   " is not a regular file owned by root or the "
                                   "caller and writable by no one else: not loaded");
            return;
        }
        const image::Program helper = image::find_helper("gpubox-nvml");
        const image::ToolResult r = image::run_tool(helper, {"gpubox-nvml", lib}, {}, false);
        if (!r.ok()) {
            std::string why = r.err;
            while (!why.empty() && why.back() == '\n') why.pop_back();
            if (why.find('\n') != std::string::npos) why = why.substr(why.rfind('\n') + 1);
            for (char& c : why)  // NVML's text, shown on the caller's terminal
                if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)
                    c = '?';
            inv.nvml_problem =
                cat("gpubox-nvml ", r.failure(), why.empty() ? "" : ": ", why.substr(0, 200));
            return;
        }
        gpu::apply_nvml_report(inv, gpu::parse_nvml_report(r.out));
    } catch (const std::exception& e) {
        inv.nvml_problem = e.what();
    }
    if (!inv.nvml_problem.empty()) log::debug("nvml: " + inv.nvml_problem);
}

}  // namespace gpubox::launcher
