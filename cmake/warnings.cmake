# One place for warning flags, applied per target so third-party code is not affected.
function(gpubox_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wformat=2 -Wno-missing-field-initializers)
  # GCC 12 reports false -Wrestrict positives inside std::string (GCC bug 105329).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(GPUBOX_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
