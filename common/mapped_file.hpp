#pragma once
// A regular file mapped read-only, guarded against SIGBUS. Used by the monitor and `gpubox
// list` (host and image ld.so.cache), never inside the sandbox: the guard is a process-wide
// signal handler, which belongs to the process that reads the files, not to the workload's.
#include <csignal>
#include <cstddef>
#include <optional>
#include <string_view>

#include "common/unique_fd.hpp"

namespace gpubox {

// Its pages are read where they are looked at: a binary search of a host's ld.so.cache
// (hundreds of KiB) touches a few, where reading it whole cost ~0.4 ms with 5000 libraries
// listed. ldconfig renames a new cache into place and never rewrites one, but a file can still
// shrink while mapped (a driver root being rewritten, an image's owner truncating it), and a
// read past its new end faults (SIGBUS). While a MappedFile lives, such a fault maps a page of
// zeros there instead and the read goes on: the parsers bound-check every offset, and
// truncated() tells the caller to discard what it read. A SIGBUS anywhere else keeps its usual
// effect. Single-threaded use.
struct MappingGuard;  // the SIGBUS handler's slot for one live mapping (mapped_file.cpp)
class MappedFile {
public:
    MappedFile() = default;
    MappedFile(const char* data, std::size_t size, MappingGuard* guard)
        : data_(data), size_(size), guard_(guard) {}
    MappedFile(MappedFile&& o) noexcept : data_(o.data_), size_(o.size_), guard_(o.guard_) {
        o.data_ = nullptr, o.size_ = 0, o.guard_ = nullptr;
    }
    MappedFile& operator=(MappedFile&& o) noexcept;
    ~MappedFile();
    std::string_view bytes() const { return {data_, size_}; }
    // The file shrank under a read of the mapping, which then saw zeros.
    bool truncated() const;

private:
    const char* data_ = nullptr;
    std::size_t size_ = 0;
    MappingGuard* guard_ = nullptr;
};

// `file` (open for reading) mapped, guarded. nullopt where it is not a regular file, is larger
// than `limit`, cannot be mapped, or no guard slot is free (unguarded is as good as unreadable).
std::optional<MappedFile> map_regular(const UniqueFd& file, std::size_t limit);

}  // namespace gpubox
