# The CUDA plugin (lib/backend/cuda_plugin.h), included by lib/CMakeLists.txt. libdtrain_cuda.so
# holds the CUDA code of backend, compress and comm (each module adds its cuda/ sources to the
# target dtrain_cuda) and alone links cudart, cuBLAS, cuDNN and NCCL, so that a program on the
# CPU never maps them. It does not link the static dtrain libraries: their code, and their state,
# stay one copy, in the program that loads the plugin. dtrain_cuda_host(TARGET) makes a program
# such a host; after each link of the plugin, its dtrain symbols are listed
# (cmake/cuda_plugin_imports.cmake), and the program
#  - contains whatever the plugin calls, even where it calls none of that itself: the symbols the
#    plugin leaves undefined enter its link as EXTERNs of a linker script, which pull them from
#    the static libraries;
#  - exports those, and the typeinfo, vtables and static variables of inline functions that the
#    plugin has copies of (a dynamic list): the plugin binds to the program's.
# Whatever still goes missing shows when the plugin is loaded (RTLD_NOW), not later: the test
# app_cuda_plugin loads it on any machine. The CUDA tests link the plugin itself (and are hosts
# too): the loader then finds it in the program rather than loading a second copy.
if(DTRAIN_CUDA)
  add_library(dtrain_cuda SHARED)
  target_include_directories(dtrain_cuda PRIVATE ${PROJECT_SOURCE_DIR}/lib)
  target_compile_definitions(dtrain_cuda PRIVATE DTRAIN_HAVE_CUDA)
  target_link_libraries(dtrain_cuda PRIVATE dtrain_warnings)
  # The plugin's references to its own functions bind to them: comm/host_transport.cpp has
  # functions of the same names in the program, which forward to the plugin's.
  target_link_options(dtrain_cuda PRIVATE LINKER:-Bsymbolic-functions)
  # Found at run time in ../lib beside bin/dtrain (backend/cuda_plugin.cpp lists where it looks).
  install(TARGETS dtrain_cuda LIBRARY DESTINATION lib)

  set(_dir ${CMAKE_CURRENT_BINARY_DIR}/cuda_plugin)
  set(DTRAIN_CUDA_EXPORTS ${_dir}/exports.dynlist)
  set(DTRAIN_CUDA_IMPORTS ${_dir}/imports.ld)
  add_custom_command(
    OUTPUT ${DTRAIN_CUDA_IMPORTS} ${DTRAIN_CUDA_EXPORTS}
    COMMAND ${CMAKE_COMMAND} -DPLUGIN=$<TARGET_FILE:dtrain_cuda> -DNM=${CMAKE_NM}
            -DIMPORTS=${DTRAIN_CUDA_IMPORTS} -DEXPORTS=${DTRAIN_CUDA_EXPORTS}
            -P ${PROJECT_SOURCE_DIR}/cmake/cuda_plugin_imports.cmake
    DEPENDS dtrain_cuda ${PROJECT_SOURCE_DIR}/cmake/cuda_plugin_imports.cmake
    COMMENT "" VERBATIM)
  add_custom_target(dtrain_cuda_imports DEPENDS ${DTRAIN_CUDA_IMPORTS} ${DTRAIN_CUDA_EXPORTS})
  set_property(GLOBAL PROPERTY DTRAIN_CUDA_EXPORTS ${DTRAIN_CUDA_EXPORTS})
  set_property(GLOBAL PROPERTY DTRAIN_CUDA_IMPORTS ${DTRAIN_CUDA_IMPORTS})
endif()

# dtrain_cuda_host(TARGET): TARGET, a program, may load the CUDA plugin (see above); nothing
# without DTRAIN_CUDA.
function(dtrain_cuda_host target)
  if(NOT DTRAIN_CUDA)
    return()
  endif()
  get_property(exports GLOBAL PROPERTY DTRAIN_CUDA_EXPORTS)
  get_property(imports GLOBAL PROPERTY DTRAIN_CUDA_IMPORTS)
  target_link_options(${target} PRIVATE LINKER:--dynamic-list=${exports} LINKER:${imports})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${exports} ${imports})
  add_dependencies(${target} dtrain_cuda_imports)
endfunction()
