#pragma once
#include <exception>
#include <stdexcept>
#include <string>
#include <system_error>

namespace gpubox {

// Bad command-line input: exit 125.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// An impossible or inconsistent request, found before anything ran: exit 125.
struct PlanError : std::runtime_error {
    explicit PlanError(const std::string& what, std::string hint_text = {})
        : std::runtime_error(what), hint(std::move(hint_text)) {}
    std::string hint;
};

// The kernel refused: keeps the operation text ("mount(\"a\" -> \"b\")") and errno.
struct SysError : std::system_error {
    SysError(int err, const std::string& op_text)
        : std::system_error(err, std::generic_category(), op_text), op(op_text) {}
    std::string op;
    int err() const { return code().value(); }
};

// A context frame ("mount step 3/19 (...)"), always thrown with std::throw_with_nested.
struct SetupError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The exec of the workload failed: 126 (cannot execute) or 127 (not found).
struct ExecError : std::runtime_error {
    ExecError(const std::string& what, int exit_code)
        : std::runtime_error(what), code(exit_code) {}
    int code;
};

// "frame: frame: op(args): reason", walking nested exceptions outermost first.
std::string describe(const std::exception_ptr& error);

// One extra line of advice for well-known failures, or "" when there is none.
std::string hint_for(const std::exception_ptr& error);

// The innermost SysError in a nested chain, or nullptr.
const SysError* innermost_sys_error(const std::exception& e);

}  // namespace gpubox
