#include "image/progress.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "common/text.hpp"

namespace gpubox::image {
namespace fs = std::filesystem;

namespace {

std::string rate(std::uint64_t bytes, double seconds) {
    char buf[32];
    const double per_s = seconds > 0 ? static_cast<double>(bytes) / seconds : 0;
    if (per_s < (1 << 20)) std::snprintf(buf, sizeof buf, "%.1f KiB/s", per_s / 1024);
    else std::snprintf(buf, sizeof buf, "%.1f MiB/s", per_s / (1 << 20));
    return buf;
}

void write_text(int fd, const std::string& text) {
    std::size_t at = 0;
    while (at < text.size()) {
        const ssize_t n = ::write(fd, text.data() + at, text.size() - at);
        if (n <= 0) return;  // progress is best effort
        at += static_cast<std::size_t>(n);
    }
}

}  // namespace

std::string render_layer(std::size_t index, std::size_t count, const std::string& digest,
                         std::uint64_t bytes, std::uint64_t total, double seconds, bool done,
                         bool terminal, std::uint64_t from, bool stored) {
    const std::string head =
        cat("gpubox: pull: layer ", index, "/", count, " ", digest.substr(0, 19));
    const std::uint64_t moved = bytes > from ? bytes - from : 0;
    const std::string note = stored ? ", already stored: not unpacked again" : "";
    if (!terminal) {
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.1f", seconds);
        // First seen partly written: its time is not known, only the rate since.
        const std::string took = from ? cat(", ", rate(moved, seconds))
                                      : cat(" in ", secs, " s, ", rate(moved, seconds));
        return cat(head, ": ", human_size(total), seconds > 0 && moved ? took : "", note);
    }
    std::string line = cat(head, "  ", human_size(bytes), " / ", human_size(total), "  ");
    line += seconds > 0 && moved ? rate(moved, seconds) : done ? "done" : "";
    return line + note;
}

DownloadProgress::DownloadProgress(const Manifest& m, fs::path layout, Progress mode, int fd)
    : layout_(std::move(layout)), mode_(mode), fd_(fd), started_(Clock::now()), shown_() {
    for (const Descriptor& d : m.layers) {
        Layer l;
        l.digest = d.digest, l.size = d.size;
        layers_.push_back(l);
    }
    Layer config;
    config.digest = m.config.digest, config.size = m.config.size, config.visible = false;
    layers_.push_back(config);
}

void DownloadProgress::poll() {
    const Clock::time_point now = Clock::now();
    struct stat st {};
    for (Layer& l : layers_) {
        if (l.done) continue;
        if (::stat((layout_ / "blobs/sha256" / l.digest.substr(7)).c_str(), &st) == 0) {
            l.done = true, l.bytes = l.size, l.end = now;
            if (!l.seen) l.seen = true, l.start = started_;
        }
    }
    DIR* dir = ::opendir(layout_.c_str());
    if (!dir) return;
    while (const dirent* e = ::readdir(dir)) {
        const std::string name = e->d_name;
        if (name.rfind("oci-put-blob", 0) != 0) continue;
        auto it = temps_.find(name);
        if (it == temps_.end()) {
            std::size_t i = 0;
            while (i < layers_.size() && (layers_[i].done || layers_[i].seen)) ++i;
            if (i == layers_.size()) continue;
            layers_[i].seen = true, layers_[i].start = now;
            it = temps_.emplace(name, i).first;
        }
        Layer& l = layers_[it->second];
        if (!l.done && ::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
            l.bytes = std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), l.size);
            if (l.start == now) l.from = l.bytes;  // first seen already this large
        }
    }
    ::closedir(dir);
}

void DownloadProgress::show() {
    std::size_t count = 0;
    for (const Layer& l : layers_) count += l.visible;
    std::string text;
    if (mode_ == Progress::terminal && drawn_ > 0) text += cat("\033[", drawn_, "A");
    std::size_t index = 0;
    drawn_ = 0;
    for (Layer& l : layers_) {
        if (!l.visible) continue;
        ++index;
        const Clock::time_point upto = l.done ? l.end : Clock::now();
        const double secs = l.seen ? std::chrono::duration<double>(upto - l.start).count() : 0.0;
        if (mode_ == Progress::terminal) {
            text += "\r\033[K" +
                    render_layer(index, count, l.digest, l.bytes, l.size, secs, l.done, true,
                                 l.from, l.stored) +
                    "\n";
            ++drawn_;
        } else if (l.done && !l.reported) {
            text += render_layer(index, count, l.digest, l.bytes, l.size, secs, true, false, l.from,
                                 l.stored) +
                    "\n";
            l.reported = true;
        }
    }
    write_text(fd_, text);
}

void DownloadProgress::tick() {
    if (mode_ == Progress::none) return;
    const Clock::time_point now = Clock::now();
    if (now - shown_ < std::chrono::milliseconds(200)) return;
    shown_ = now;
    poll();
    show();
}

void DownloadProgress::stored(const std::string& digest) {
    for (Layer& l : layers_)
        if (l.digest == digest) l.stored = true;
}

void DownloadProgress::finish() {
    if (mode_ == Progress::none) return;
    poll();
    show();
}

}  // namespace gpubox::image
