#pragma once
// What one layer member means for the tree being built: a path to create, a whiteout, an opaque
// marker, or something refused. Pure, so the rules are unit-tested without a filesystem.
#include <set>
#include <string>
#include <string_view>

namespace gpubox::image {

struct EntryPlan {
    enum class Kind {
        create,    // make `path` (a file, directory, link, ...)
        whiteout,  // ".wh.NAME": remove `path` (= DIR/NAME) from the lower layers
        opaque,    // ".wh..wh..opq": hide the lower layers' content of directory `path`
        root,      // "." or "/": the image's root directory itself (its mode only)
        unsafe,    // a ".." component, or a whiteout of nothing: skipped and counted
    };
    Kind kind = Kind::unsafe;
    std::string path;  // relative, normalized ("usr/bin/env"); "" for the root
};

// "./usr//bin/" -> create "usr/bin"; "a/.wh.b" -> whiteout "a/b"; "a/.wh..wh..opq" -> opaque
// "a"; any ".." -> unsafe. Leading "/" and "./" are dropped, as tar does.
EntryPlan plan_entry(std::string_view member);

// Normalized relative path, or "" with ok=false for a ".." anywhere (hard link targets).
bool normalize_member(std::string_view member, std::string& out);

// Under an opaque directory `dir`, whether the existing `child` (a path below `dir`) stays:
// only what this same layer added does (the marker hides lower layers, not its own layer).
// A directory this layer re-created stays, but its own lower content is judged the same way.
bool keeps_under_opaque(const std::set<std::string>& added_this_layer, const std::string& child);

}  // namespace gpubox::image
