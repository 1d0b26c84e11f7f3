#include "image/reference.hpp"

#include <cctype>

#include "common/error.hpp"
#include "common/text.hpp"

namespace gpubox::image {
namespace {

bool is_hex(const std::string& s) {
    for (char c : s)
        if (!std::isxdigit(static_cast<unsigned char>(c)) ||
            std::isupper(static_cast<unsigned char>(c)))
            return false;
    return true;
}

// A registry path component: lower-case alphanumerics with single separators, as the
// distribution spec's grammar allows (we check the character set; the registry checks the rest).
bool valid_repo(const std::string& repo) {
    if (repo.empty() || repo.front() == '/' || repo.back() == '/' ||
        repo.find("//") != std::string::npos)
        return false;
    for (char c : repo)
        if (!(std::islower(static_cast<unsigned char>(c)) ||
              std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
              c == '/'))
            return false;
    return repo.find("..") == std::string::npos;
}

bool valid_tag(const std::string& tag) {
    if (tag.empty() || tag.size() > 128 || tag[0] == '.' || tag[0] == '-') return false;
    for (char c : tag)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'))
            return false;
    return true;
}

Source parse_docker(Source s, const std::string& rest) {
    const auto slash = rest.find('/');
    if (slash == std::string::npos || slash == 0)
        throw UsageError(
            cat("pull ", s.text, ": expected docker://HOST[:PORT]/REPO[:TAG|@DIGEST]"));
    s.host = rest.substr(0, slash);
    std::string ref = rest.substr(slash + 1);
    if (const auto at = ref.find('@'); at != std::string::npos) {
        s.digest = ref.substr(at + 1);
        ref = ref.substr(0, at);
        if (!starts_with(s.digest, "sha256:") || s.digest.size() != 71 ||
            !is_hex(s.digest.substr(7)))
            throw UsageError(
                cat("pull ", s.text, ": a digest is sha256: and 64 lower-case hex digits"));
    }
    if (const auto colon = ref.rfind(':');
        colon != std::string::npos && ref.find('/', colon) == std::string::npos) {
        s.tag = ref.substr(colon + 1);
        ref = ref.substr(0, colon);
        if (!valid_tag(s.tag))
            throw UsageError(cat("pull ", s.text, ": invalid tag ", quote(s.tag)));
    }
    if (!valid_repo(ref))
        throw UsageError(cat("pull ", s.text, ": invalid repository ", quote(ref)));
    for (char c : s.host)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
              c == '[' || c == ']'))
            throw UsageError(cat("pull ", s.text, ": invalid registry host ", quote(s.host)));
    s.repo = ref;
    return s;
}

// HOST[:PORT]/...: a first part with a '.' or a ':', or localhost (podman's rule for a host).
bool looks_like_registry(const std::string& text) {
    const auto slash = text.find('/');
    if (slash == std::string::npos || slash == 0) return false;
    const std::string host = text.substr(0, slash);
    if (host == "." || host == "..") return false;
    return host == "localhost" || host.find('.') != std::string::npos ||
           host.find(':') != std::string::npos;
}

std::string strip_extensions(std::string base) {
    for (const char* ext : {".gz", ".tgz", ".zst", ".xz", ".bz2", ".tar", ".oci", ".docker"}) {
        const std::string e = ext;
        if (base.size() > e.size() && base.compare(base.size() - e.size(), e.size(), e) == 0) {
            base.resize(base.size() - e.size());
            return strip_extensions(base);
        }
    }
    return base;
}

std::string base_name(std::string path) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    return path.substr(path.rfind('/') + 1);
}

}  // namespace

Source parse_source(const std::string& text) {
    Source s;
    s.text = text;
    const auto colon = text.find(':');
    const std::string transport = colon == std::string::npos ? "" : text.substr(0, colon);
    const std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
    if (text.find('\0') != std::string::npos) throw UsageError("pull: SOURCE contains NUL");
    if (transport == "docker") {
        if (!starts_with(rest, "//"))
            throw UsageError(cat("pull ", text, ": expected docker://HOST/REPO"));
        s.kind = Source::Kind::docker;
        return parse_docker(s, rest.substr(2));
    }
    if (transport == "docker-archive") s.kind = Source::Kind::docker_archive;
    else if (transport == "oci-archive") s.kind = Source::Kind::oci_archive;
    else if (transport == "oci") s.kind = Source::Kind::oci_dir;
    else if (transport == "tar") s.kind = Source::Kind::tar;
    else if (looks_like_registry(text)) {
        // HOST[:PORT]/REPO[:TAG]: a registry's image, as podman takes it without a transport.
        s.kind = Source::Kind::docker;
        s.text = "docker://" + text;
        return parse_docker(s, text);
    } else
        throw UsageError(cat("pull ", text,
                             ": unknown transport (use docker://, docker-archive:, oci-archive:, "
                             "oci: or tar:)"));
    s.path = rest;
    if (s.kind == Source::Kind::oci_dir) {
        // oci:DIR:TAG: the tag is what follows the last ':' when no '/' does.
        if (const auto c = rest.rfind(':');
            c != std::string::npos && rest.find('/', c) == std::string::npos) {
            s.path = rest.substr(0, c), s.tag = rest.substr(c + 1);
            if (!valid_tag(s.tag))
                throw UsageError(cat("pull ", text, ": invalid tag ", quote(s.tag)));
        }
    }
    if (s.path.empty())
        throw UsageError(cat("pull ", text, ": missing a path after ", transport, ":"));
    return s;
}

std::string default_name(const Source& s) {
    if (s.kind == Source::Kind::docker) {
        const std::string last = s.repo.substr(s.repo.rfind('/') + 1);
        if (!s.digest.empty()) return cat(last, "@sha256:", s.digest.substr(7, 12));
        return cat(last, ":", s.tag.empty() ? "latest" : s.tag);
    }
    std::string base = strip_extensions(base_name(s.path));
    if (!s.tag.empty()) base += ":" + s.tag;
    return base;
}

bool valid_name(const std::string& name) {
    if (name.empty() || name.size() > 128 || name.back() == '/') return false;
    if (name.find("..") != std::string::npos) return false;
    for (std::size_t i = 0; i < name.size(); ++i) {
        const char c = name[i];
        // Each '/'-separated part starts as a name does: "lab/py", never "lab//py" or "lab/.x".
        if ((i == 0 || name[i - 1] == '/') && (c == '.' || c == '-' || c == '/')) return false;
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' ||
              c == '@' || c == '+' || c == '-' || c == '/'))
            return false;
    }
    return true;
}

void validate_name(const std::string& name) {
    if (!valid_name(name))
        throw UsageError(cat("invalid image name ", quote(name),
                             " (1-128 of A-Z a-z 0-9 . _ : @ + - /, each /-separated part "
                             "not starting with . or -, no ..)"));
}

std::string skopeo_source(const Source& s, const std::string& cwd) {
    const auto abs = [&](const std::string& p) { return p[0] == '/' ? p : cwd + "/" + p; };
    switch (s.kind) {
        case Source::Kind::docker: return s.text;
        case Source::Kind::docker_archive: return "docker-archive:" + abs(s.path);
        case Source::Kind::oci_archive: return "oci-archive:" + abs(s.path);
        case Source::Kind::oci_dir:
            return "oci:" + abs(s.path) + (s.tag.empty() ? "" : ":" + s.tag);
        case Source::Kind::tar: return "";
    }
    return "";
}

}  // namespace gpubox::image
