# Toolchain file for run_model on an Android phone (arm64-v8a) with the NDK.
#
#   export ANDROID_NDK=$HOME/Android/Sdk/ndk/<version>   # r23 or newer
#   cmake -S . -B build-android -DCMAKE_TOOLCHAIN_FILE=android-arm64-v8a.cmake \
#         -DTVM_ROOT=/path/to/tvm -DTVM_RUNTIME_LIB_DIR=/path/to/tvm/build-android \
#         -DTVM_FFI_LIB_DIR=/path/to/tvm/build-android/lib
#
# It sets the ABI and the lowest Android API level, then hands over to the NDK's
# own toolchain file, which picks its clang and sysroot.
set(ANDROID_ABI arm64-v8a CACHE STRING "")
set(ANDROID_PLATFORM android-28 CACHE STRING "")
set(ANDROID_STL c++_shared CACHE STRING "")
if(NOT DEFINED ENV{ANDROID_NDK})
  message(FATAL_ERROR "set ANDROID_NDK to the NDK folder (Android Studio: SDK Manager, NDK)")
endif()
include($ENV{ANDROID_NDK}/build/cmake/android.toolchain.cmake)
