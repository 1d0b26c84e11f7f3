#include "image/tool_error.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "common/text.hpp"

namespace gpubox::image {
namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

bool has(const std::string& hay, const char* needle) {
    return hay.find(needle) != std::string::npos;
}

std::string endpoint(const Source& s) {
    if (s.host.find(':') != std::string::npos) return s.host;
    return s.host + ":443";
}

// The first "sha256:<hex>" after `from` in `text`, shortened, or "".
std::string digest_after(const std::string& text, std::size_t from) {
    const auto at = text.find("sha256:", from);
    return at == std::string::npos ? "" : text.substr(at, 19);
}

}  // namespace

std::string last_line(const std::string& text, std::size_t max) {
    std::string line;
    std::size_t end = text.size();
    while (end > 0) {
        const auto start = text.rfind('\n', end - 1);
        const std::size_t b = start == std::string::npos ? 0 : start + 1;
        line = text.substr(b, end - b);
        if (line.find_first_not_of(" \t\r") != std::string::npos) break;
        if (start == std::string::npos) break;
        end = start;
    }
    for (char& c : line)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    // skopeo's lines start with its log prefix: time="..." level=fatal msg="..."
    if (const auto m = line.find("msg=\""); m != std::string::npos) {
        line = line.substr(m + 5);
        if (!line.empty() && line.back() == '"') line.pop_back();
        std::string plain;  // its quotes come escaped: \"
        for (std::size_t i = 0; i < line.size(); ++i)
            if (!(line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '"')) plain += line[i];
        line = plain;
    }
    if (line.size() > max) line = line.substr(0, max) + "...";
    return line;
}

std::string explain_pull_failure(const Source& s, const std::string& err) {
    const std::string t = lower(err);
    if (has(t, "digest did not match") || has(t, "digest mismatch") ||
        has(t, "does not match digest")) {
        const auto at = t.find("expected");
        const std::string want = at == std::string::npos ? "" : digest_after(t, at);
        return want.empty()
                   ? "digest mismatch: a blob's content does not match its digest"
                   : cat("digest mismatch: a blob's content does not match its digest (expected ",
                         want, "...)");
    }
    if (has(t, "unauthorized") || has(t, "authentication required") ||
        has(t, "invalid username/password") || has(t, "access to the resource is denied") ||
        has(t, "status code 401"))
        return "authentication failed (check --creds, --authfile or the registry login in "
               "~/.config/containers/auth.json)";
    if (has(t, "server gave http response to https client"))
        return cat(endpoint(s),
                   " speaks plain HTTP, not HTTPS (add --insecure if you trust the network)");
    if (has(t, "x509:") || has(t, "certificate") || has(t, "tls:"))
        return cat("TLS: the certificate of ", endpoint(s), " is not trusted (",
                   last_line(err, 160), "); put its CA in ~/.config/containers/certs.d/",
                   endpoint(s), "/ca.crt or pass --cert-dir");
    if (has(t, "connection refused") || has(t, "no such host") || has(t, "i/o timeout") ||
        has(t, "network is unreachable") || has(t, "connection reset") ||
        has(t, "pinging container registry"))
        return cat("cannot connect to ", endpoint(s), " (", last_line(err, 160), ")");
    if (has(t, "manifest unknown") || has(t, "name unknown") || has(t, "not found") ||
        has(t, "status code 404"))
        return "no such image/tag";
    if (has(t, "no image found in manifest list") || has(t, "choosing an image from manifest list"))
        return cat("no image for this platform in the index (", last_line(err, 160),
                   "); see --platform");
    if (has(t, "no such file or directory"))
        return cat("no such file or directory (", last_line(err, 160), ")");
    return last_line(err);
}

}  // namespace gpubox::image
