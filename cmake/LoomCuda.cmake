# Decides whether the CUDA twins of the kernels are built. AUTO turns CUDA on where nvcc exists
# (also in /usr/local/cuda, which is not on PATH by default); the CPU build never needs it.
set(LOOM_HAVE_CUDA OFF)
if(NOT LOOM_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)  # 'native' fails on machines without a GPU
    endif()
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 dialect flags for nvcc
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(LOOM_HAVE_CUDA ON)
  elseif(LOOM_CUDA STREQUAL "ON")
    message(FATAL_ERROR "LOOM_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()
message(STATUS "Loom: CUDA ${LOOM_HAVE_CUDA} (LOOM_CUDA=${LOOM_CUDA})")
