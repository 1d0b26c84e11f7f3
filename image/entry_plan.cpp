#include "image/entry_plan.hpp"

namespace gpubox::image {

bool normalize_member(std::string_view member, std::string& out) {
    out.clear();
    std::size_t i = 0;
    while (i <= member.size()) {
        std::size_t j = member.find('/', i);
        if (j == std::string_view::npos) j = member.size();
        const std::string_view part = member.substr(i, j - i);
        i = j + 1;
        if (part.empty() || part == ".") continue;
        if (part == "..") return false;
        if (!out.empty()) out += '/';
        out.append(part);
    }
    return true;
}

EntryPlan plan_entry(std::string_view member) {
    EntryPlan p;
    std::string path;
    if (member.find('\0') != std::string_view::npos || !normalize_member(member, path)) return p;
    if (path.empty()) return {EntryPlan::Kind::root, ""};
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
    const std::string base = path.substr(slash == std::string::npos ? 0 : slash + 1);
    if (base == ".wh..wh..opq") return {EntryPlan::Kind::opaque, dir};
    if (base.rfind(".wh.", 0) == 0) {
        const std::string target = base.substr(4);
        // ".wh." alone, ".wh.." or ".wh..wh.x" (AUFS metadata other than the opaque marker).
        if (target.empty() || target == "." || target == ".." || target.rfind(".wh.", 0) == 0)
            return p;
        return {EntryPlan::Kind::whiteout, dir.empty() ? target : dir + "/" + target};
    }
    return {EntryPlan::Kind::create, path};
}

bool keeps_under_opaque(const std::set<std::string>& added_this_layer, const std::string& child) {
    return added_this_layer.count(child) != 0;
}

}  // namespace gpubox::image
