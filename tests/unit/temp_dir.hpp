#pragma once
// A fresh directory under /tmp for one test, removed with everything in it when the test ends.
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace gpubox::test {

struct TempDir {
    std::filesystem::path dir;
    explicit TempDir(const std::string& name) {
        std::string tmpl = "/tmp/gpubox-" + name + ".XXXXXX";
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp(" + tmpl + ") failed");
        dir = tmpl;
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
};

}  // namespace gpubox::test
