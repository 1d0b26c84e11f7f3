// preflight-cost DRIVER_ROOT ROOTFS CMD [N] [K=V...]: the time gpubox run's preflight
// (--preflight warn) takes in the process, N times over (default 2000), as the median and
// quartiles in microseconds. The run's start-up pays it once; here the files are as warm as in
// back-to-back runs. bench/preflight.sh prints it beside the end-to-end difference.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "gpu/gpu_spec.hpp"
#include "preflight/preflight.hpp"
#include "rootfs/view.hpp"

int main(int argc, char** argv) {
    using namespace gpubox;
    if (argc < 4)
        return std::fprintf(stderr, "usage: preflight-cost DRIVER_ROOT ROOTFS CMD [N] [K=V...]\n"),
               2;
    const int n = argc > 4 ? std::atoi(argv[4]) : 2000;
    preflight::Request r;
    r.driver_root = argv[1];
    r.target.rootfs = argv[2];
    r.command = argv[3];
    r.gpus = gpu::parse_gpu_spec("0");
    for (int i = 5; i < argc; ++i) {
        const std::string kv = argv[i];
        r.target.env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    }
    // The run reads ROOTFS through the sandbox's read-only view of it, made once per run.
    const UniqueFd root = rootfs::open_read_only_view(r.target.rootfs, "ROOTFS");
    r.root = root.get();
    log::set_level(log::Level::error);  // a misfit's warning would be timed as output
    std::vector<double> us;
    for (int i = 0; i < n; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        preflight::preflight_run(preflight::Mode::warn, r);
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
    }
    std::sort(us.begin(), us.end());
    const auto at = [&](double q) { return us[static_cast<std::size_t>(q * (us.size() - 1))]; };
    std::printf("%.1f %.1f %.1f\n", at(0.5), at(0.25), at(0.75));
    return 0;
}
