# Finds LibTorch 2.11 and decides whether the CUDA code paths are compiled.
#
# LibTorch comes from LIBTORCH=/path (an unpacked official archive, or -DLIBTORCH=) or else from
# the torch wheel in the project's virtual environment (.venv, made by scripts/setup-deps.sh;
# XTRAIN_VENV=PATH names another). XTRAIN_CUDA (default ON) compiles the CUDA paths when that
# LibTorch was built with CUDA and the CUDA toolkit is installed; it is forced OFF otherwise.

set(XTRAIN_TORCH_VERSION_REQUIRED 2.11.0)
if(NOT LIBTORCH AND DEFINED ENV{LIBTORCH})
  set(LIBTORCH $ENV{LIBTORCH})
endif()
# The environment's Python runs the references of the tests and benchmarks, whichever LibTorch
# the build links.
if(DEFINED ENV{XTRAIN_VENV})
  set(xtrain_venv $ENV{XTRAIN_VENV})
else()
  set(xtrain_venv ${CMAKE_SOURCE_DIR}/.venv)
endif()
find_program(XTRAIN_PYTHON python3 PATHS ${xtrain_venv}/bin NO_DEFAULT_PATH)
if(LIBTORCH)
  list(PREPEND CMAKE_PREFIX_PATH ${LIBTORCH})
  set(XTRAIN_TORCH_SOURCE "LIBTORCH=${LIBTORCH}")
else()
  if(NOT XTRAIN_PYTHON)
    message(FATAL_ERROR "No LibTorch: run scripts/setup-deps.sh (it installs the torch wheel into "
                        "${xtrain_venv}), or set LIBTORCH=/path/to/libtorch")
  endif()
  # find_spec locates the wheel without importing torch (which takes seconds).
  execute_process(
    COMMAND ${XTRAIN_PYTHON} -c
      "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('torch').origin))"
    OUTPUT_VARIABLE xtrain_torch_dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${XTRAIN_PYTHON} has no torch: run scripts/setup-deps.sh")
  endif()
  list(PREPEND CMAKE_PREFIX_PATH ${xtrain_torch_dir}/share/cmake)
  set(XTRAIN_TORCH_SOURCE "torch wheel in ${xtrain_venv}")
endif()

option(XTRAIN_CUDA "Compile the CUDA code paths (when LibTorch has CUDA and the toolkit is there)" ON)
if(XTRAIN_CUDA)
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    message(STATUS "xtrain: no CUDA toolkit found, building without the CUDA paths")
    set(XTRAIN_CUDA OFF)
  endif()
endif()
if(XTRAIN_CUDA)
  # The GPU architectures of xtrain's own kernels (lib/model/cuda): A100 (80) and H100/H200 (90)
  # unless -DCMAKE_CUDA_ARCHITECTURES says otherwise. Set before CUDA is enabled, because
  # enabling it (here or in LibTorch's config) caches nvcc's default (75) when nothing is set; a
  # cache entry still holding that default (its help string is CMake's own) is replaced too,
  # while a value given with -D carries another help string and is kept.
  get_property(xtrain_cuda_arch_help CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY HELPSTRING)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR xtrain_cuda_arch_help STREQUAL "CUDA architectures")
    set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING
        "GPU architectures of xtrain's CUDA kernels (80: A100, 90: H100/H200)" FORCE)
  endif()
  enable_language(CUDA)
  set(xtrain_cuda_flags "${CMAKE_CUDA_FLAGS}")
else()
  # A CUDA LibTorch still links its CUDA libraries; xtrain just compiles no CUDA path.
  set(CAFFE2_USE_CUDNN OFF)
endif()
find_package(Torch REQUIRED)
if(XTRAIN_CUDA)
  # LibTorch's config appends the nvcc flags of its own build to CMAKE_CUDA_FLAGS (code for a
  # dozen architectures from sm_50 up, which nvcc 13 no longer compiles for, among them) and
  # sets CMAKE_CUDA_ARCHITECTURES to OFF; xtrain's kernels take the project's flags and the
  # cached architectures instead.
  set(CMAKE_CUDA_FLAGS "${xtrain_cuda_flags}")
  unset(CMAKE_CUDA_ARCHITECTURES)
endif()
if(NOT Torch_VERSION VERSION_EQUAL XTRAIN_TORCH_VERSION_REQUIRED)
  message(FATAL_ERROR "xtrain needs LibTorch ${XTRAIN_TORCH_VERSION_REQUIRED}, found ${Torch_VERSION} "
                      "(${XTRAIN_TORCH_SOURCE}); run scripts/setup-deps.sh or point LIBTORCH at 2.11.0")
endif()
if(XTRAIN_CUDA AND NOT TARGET torch_cuda)
  message(STATUS "xtrain: LibTorch has no CUDA, building without the CUDA paths")
  set(XTRAIN_CUDA OFF)
endif()
if(XTRAIN_CUDA)
  set(XTRAIN_CUDA_VERSION ${CUDAToolkit_VERSION})
else()
  set(XTRAIN_CUDA_VERSION "")
endif()
message(STATUS "xtrain: LibTorch ${Torch_VERSION} from ${XTRAIN_TORCH_SOURCE}; CUDA paths: ${XTRAIN_CUDA} ${XTRAIN_CUDA_VERSION}")

# The OpenMP runtime LibTorch's CPU kernels run on (the wheel ships its own libgomp). xtrain's
# files that call at::parallel_for link it, so that the process keeps one OpenMP thread pool.
find_library(XTRAIN_OPENMP_RUNTIME NAMES libgomp.so.1 gomp PATHS ${TORCH_INSTALL_PREFIX}/lib NO_DEFAULT_PATH)
if(NOT XTRAIN_OPENMP_RUNTIME)
  find_package(OpenMP REQUIRED COMPONENTS CXX)
  set(XTRAIN_OPENMP_RUNTIME OpenMP::OpenMP_CXX)
endif()
