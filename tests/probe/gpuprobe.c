#define _GNU_SOURCE
/* gpuprobe: a dynamically linked program inside the test rootfs that uses the driver the way
 * CUDA programs do, by dlopen()ing the sonames, and prints what it got. With arguments, it
 * dlopen()s each, as an ICD loader (OpenCL, Vulkan) does the name its vendor file gives. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
    int rc = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; ++i) {
            void* h = dlopen(argv[i], RTLD_NOW);
            printf("%s=%s\n", argv[i], h ? "ok" : dlerror());
            if (!h) rc = 1;
        }
        return rc;
    }
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (!cuda) {
        printf("libcuda=%s\n", dlerror());
        rc = 1;
    } else {
        int (*get_version)(int*) = (int (*)(int*))dlsym(cuda, "cuDriverGetVersion");
        int (*init)(unsigned) = (int (*)(unsigned))dlsym(cuda, "cuInit");
        int (*count)(int*) = (int (*)(int*))dlsym(cuda, "cuDeviceGetCount");
        int v = 0, n = 0;
        get_version(&v);
        int ir = init(0);
        count(&n);
        Dl_info info;
        dladdr((void*)get_version, &info);
        printf("cuda_driver_version=%d\ncuInit=%d\ndevices=%d\nlibcuda_path=%s\n", v, ir, n,
               info.dli_fname);
        if (ir != 0) rc = 1;
    }
    void* dev = dlopen("libcuda.so", RTLD_NOW);
    printf("libcuda.so=%s\n", dev ? "ok" : dlerror());
    void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!nvml) {
        printf("libnvidia-ml=%s\n", dlerror());
        rc = 1;
    } else {
        char buf[96] = "";
        int (*init)(void) = (int (*)(void))dlsym(nvml, "nvmlInit_v2");
        int (*drv)(char*, unsigned) =
            (int (*)(char*, unsigned))dlsym(nvml, "nvmlSystemGetDriverVersion");
        const int ir = init ? init() : -1;
        if (ir != 0) printf("nvmlInit=%d\n", ir);
        else drv(buf, sizeof buf);
        printf("nvml_driver_version=%s\n", buf);
    }
    return rc;
}
