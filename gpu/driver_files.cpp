#include "gpu/driver_files.hpp"

#include "common/error.hpp"
#include "common/text.hpp"

namespace gpubox::gpu {
namespace {

struct Table {
    Cap cap;
    const char* name;
    std::vector<std::string> libs;
    std::vector<std::string> bins;
    std::vector<std::string> configs;
};

const std::vector<Table>& tables() {
    static const std::vector<Table> t = {
        {kCapUtility,
         "utility",
         {"libnvidia-ml.so", "libnvidia-cfg.so", "libnvidia-nscq.so"},
         {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced"}},
        {kCapCompute,
         "compute",
         {"libcuda.so", "libcudadebugger.so", "libnvidia-opencl.so", "libnvidia-gpucomp.so",
          "libnvidia-ptxjitcompiler.so", "libnvidia-fatbinaryloader.so", "libnvidia-allocator.so",
          "libnvidia-compiler.so", "libnvidia-pkcs11.so", "libnvidia-pkcs11-openssl3.so",
          "libnvidia-nvvm.so", "libnvidia-tileiras.so"},
         {"nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}},
        {kCapVideo,
         "video",
         {"libvdpau_nvidia.so", "libnvidia-encode.so", "libnvidia-opticalflow.so", "libnvcuvid.so"},
         {}},
        {kCapGraphics,
         "graphics",
         {"libnvidia-eglcore.so", "libnvidia-glcore.so", "libnvidia-tls.so", "libnvidia-glsi.so",
          "libnvidia-fbc.so", "libnvidia-ifr.so", "libnvidia-rtcore.so", "libnvoptix.so",
          "libGLX_nvidia.so", "libEGL_nvidia.so", "libGLESv2_nvidia.so", "libGLESv1_CM_nvidia.so",
          "libnvidia-glvkspirv.so", "libnvidia-cbl.so"},
         {},
         // How the vendor-neutral loaders (Vulkan, GLVND's EGL, EGL platforms, OptiX) find the
         // driver: without them an image's Vulkan or EGL sees no NVIDIA device (the toolkit's
         // graphics discoverer, internal/discover/graphics.go).
         {"/etc/vulkan/icd.d/nvidia_icd.json", "/usr/share/vulkan/icd.d/nvidia_icd.json",
          "/etc/vulkan/implicit_layer.d/nvidia_layers.json",
          "/usr/share/vulkan/implicit_layer.d/nvidia_layers.json",
          "/usr/share/glvnd/egl_vendor.d/10_nvidia.json",
          "/usr/share/egl/egl_external_platform.d/15_nvidia_gbm.json",
          "/usr/share/egl/egl_external_platform.d/10_nvidia_wayland.json",
          "/usr/share/nvidia/nvoptix.bin"}},
        {kCapDisplay, "display", {}, {}},
        {kCapNgx, "ngx", {"libnvidia-ngx.so"}, {}},
    };
    return t;
}

// video implies the compute libraries; display implies the graphics ones.
unsigned expand(unsigned caps) {
    if (caps & kCapVideo) caps |= kCapCompute;
    if (caps & kCapDisplay) caps |= kCapGraphics;
    return caps;
}

}  // namespace

unsigned parse_capabilities(const std::string& text) {
    unsigned caps = 0;
    for (std::string_view name : split_at(text, ',')) {
        if (name == "all") {
            caps |= kCapAll;
            continue;
        }
        bool found = false;
        for (const Table& t : tables())
            if (name == t.name) caps |= t.cap, found = true;
        if (!found)
            throw UsageError(cat("--gpu-caps: unknown capability ", quote(name),
                                 " (compute, utility, graphics, video, display, ngx, all)"));
    }
    if (caps == 0) throw UsageError("--gpu-caps: empty list");
    return caps;
}

std::vector<std::string> library_prefixes(unsigned caps) {
    std::vector<std::string> out;
    for (const Table& t : tables())
        if (expand(caps) & t.cap) out.insert(out.end(), t.libs.begin(), t.libs.end());
    return out;
}

std::vector<std::string> config_files(unsigned caps) {
    std::vector<std::string> out;
    for (const Table& t : tables())
        if (expand(caps) & t.cap) out.insert(out.end(), t.configs.begin(), t.configs.end());
    return out;
}

std::vector<std::string> binary_names(unsigned caps) {
    std::vector<std::string> out;
    for (const Table& t : tables())
        if (caps & t.cap) out.insert(out.end(), t.bins.begin(), t.bins.end());
    return out;
}

bool needs_uvm(unsigned caps) { return (caps & (kCapCompute | kCapVideo)) != 0; }
bool needs_modeset(unsigned caps) { return (caps & kCapDisplay) != 0; }

}  // namespace gpubox::gpu
