# Toolchain file for run_model on a Linux ARM board (aarch64, glibc) with Debian's cross compiler.
#
#   apt-get install g++-aarch64-linux-gnu
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=linux-aarch64.cmake \
#         -DTVM_ROOT=/path/to/aarch64-wheel/tvm -DTVM_FFI_ROOT=/path/to/aarch64-wheel/tvm_ffi
#
# The runtime comes from the apache-tvm and apache-tvm-ffi wheels for
# manylinux_2_28_aarch64 (README.md says how to fetch them); the program runs on
# the board, or here under QEMU user mode (qemu-aarch64-static -L /usr/aarch64-linux-gnu).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
