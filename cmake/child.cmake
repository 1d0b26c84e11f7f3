# gpubox_child: the code that runs inside the sandbox's namespaces (the sandbox's init and the
# workload before exec), and nothing else, so that it can be read and audited on its own.
# docs/design.md ("The code that runs inside the new namespaces") lists exactly these files, and
# tools/child-boundary.sh (ctest: child_boundary) fails when the list and this target differ or
# when they outgrow the budget set there. The monitor calls into some of it too (the layer's
# entries, the channel's frames): shared, not duplicated. The child calls the resolver
# (rootfs/resolve.cpp, in gpubox_rootfs: GPU discovery and gpubox-unpack use it without this
# library), a few functions of monitor-side files (docs/design.md names them) and common/.
set(GPUBOX_CHILD_SOURCES
  launcher/sandbox/child_main.cpp # the ordered list of init's steps, and the workload's
  launcher/sandbox/init_loop.cpp  # pid 1: reap, forward signals, report
  launcher/sandbox/channel.cpp    # the typed frames both sides exchange
  launcher/sandbox/pty_open.cpp   # the workload's own pty
  rootfs/layer.cpp                # the root: gpubox's tmpfs, the overlay's layer and its entries
  rootfs/entry.cpp                # the one owner of the entries ops need, whatever the target
  rootfs/apply.cpp                # the executor: every op of the plan, by fd
  rootfs/wire.cpp                 # the mount ops' codec (init decodes the late plan)
  isolate/caps.cpp                # every capability dropped, no_new_privs
)
list(TRANSFORM GPUBOX_CHILD_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/)
add_library(gpubox_child STATIC ${GPUBOX_CHILD_SOURCES})
target_link_libraries(gpubox_child PUBLIC gpubox_rootfs gpubox_isolate gpubox_common)
gpubox_warnings(gpubox_child)
