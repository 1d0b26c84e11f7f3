#pragma once
// A registry pull's download progress, per layer, told from what skopeo writes into the OCI
// layout (skopeo itself runs --quiet): a layer's blob being written is a temp file in the
// layout's directory ("oci-put-blob*", its size the bytes so far), a finished one is
// blobs/sha256/<hex>. skopeo does not say which temp file is which blob: each new one is taken
// for the first layer not yet seen, in the manifest's order (skopeo starts them in that order),
// so with parallel downloads a line may show another layer's bytes for a moment; a layer's
// end, its size and its total are exact.
//
// On a terminal: one line per layer (bytes, total, rate), redrawn in place. Off a terminal:
// one line per layer as it ends. Nothing at all with Progress::none.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "image/oci.hpp"

namespace gpubox::image {

enum class Progress { none, lines, terminal };

// One layer's state as shown. Pure, unit-tested:
//   terminal: "gpubox: pull: layer 1/3 sha256:0123456789ab   4 MiB / 8 MiB  12.5 MiB/s"
//   lines:    "gpubox: pull: layer 1/3 sha256:0123456789ab: 8 MiB in 0.6 s, 12.5 MiB/s"
// The rate is of the bytes since the first look (`from` then, `seconds` ago): none before a
// second look. `stored`: the layer's tree is in the store already (skopeo fetches its blob
// again; it is not unpacked again), said in its line.
std::string render_layer(std::size_t index, std::size_t count, const std::string& digest,
                         std::uint64_t bytes, std::uint64_t total, double seconds, bool done,
                         bool terminal, std::uint64_t from = 0, bool stored = false);

class DownloadProgress {
public:
    // `layers`: the manifest's; `config`: its config blob (fetched too, not shown); `fd`: where
    // the lines go (gpubox's stderr).
    DownloadProgress(const Manifest& m, std::filesystem::path layout, Progress mode, int fd);
    void tick();    // looks at the layout again, shows what changed (at most 5 times a second)
    void finish();  // the last look: every layer fetched is shown as done
    void stored(const std::string& digest);  // this layer's tree is in the store already

private:
    using Clock = std::chrono::steady_clock;
    struct Layer {
        std::string digest;
        std::uint64_t size = 0, bytes = 0, from = 0;  // from: the bytes at the first look
        bool visible = true, done = false, reported = false, seen = false, stored = false;
        Clock::time_point start, end;
    };
    void poll();
    void show();
    std::vector<Layer> layers_;
    std::map<std::string, std::size_t> temps_;  // temp file name -> its layer
    std::filesystem::path layout_;
    Progress mode_;
    int fd_;
    std::size_t drawn_ = 0;  // lines on the terminal to redraw
    Clock::time_point started_, shown_;
};

}  // namespace gpubox::image
