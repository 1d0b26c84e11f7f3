// run --device: CDI specs read from the spec directories (gpu/cdi_spec.hpp) and planned as mount
// ops (gpu/cdi_plan.hpp).
#include "launcher/monitor/cdi_devices.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "common/log.hpp"
#include "common/sys.hpp"
#include "gpu/cdi_spec.hpp"
#include "gpu/image.hpp"
#include "preflight/discover.hpp"
#include "preflight/preflight.hpp"

namespace gpubox::launcher {
namespace {

// A host path as a device node: followed like a --bind source, its real path and numbers.
gpu::Node host_node(const std::string& path) {
    gpu::Node n{path};
    const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return n;
    UniqueFd f(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) return n;
    n.exists = true, n.is_char = S_ISCHR(st.st_mode), n.rdev = st.st_rdev;
    n.host = sys::read_fd_link(fd);
    return n;
}

}  // namespace

cdi::Plan plan_cdi_devices(const Options& o, int root) {
    std::vector<cdi::Request> requests;
    for (const std::string& d : o.devices) requests.push_back(cdi::parse_device_flag(d));
    cdi::SpecSet set;
    if (std::any_of(requests.begin(), requests.end(), [](auto& r) { return r.node.empty(); }))
        set = cdi::read_spec_dirs(cdi::spec_dirs(o.cdi_spec_dirs));
    for (cdi::Request& r : requests)
        if (r.node.empty()) r.cdi = cdi::resolve_device(set, r.text, "--device");
    gpu::ImageInfo image = gpu::inspect_image(root);
    if (const std::string v = cdi::compat_request(requests); !v.empty()) {
        std::string why;
        image.compat_first =
            preflight::forward_compat(preflight::discover_compat(root), v, {}, why);
        if (!why.empty()) log::info("cdi: forward compatibility: " + why);
    }
    cdi::Host host{host_node, [](const std::string& path) {
                       const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
                       if (fd < 0) return std::string();
                       UniqueFd f(fd);
                       return cdi::elf_soname(fd);
                   }};
    cdi::Plan plan = cdi::plan_devices(requests, host, image);
    for (const std::string& line : plan.summary) log::info("device: " + line);
    return plan;
}

}  // namespace gpubox::launcher
