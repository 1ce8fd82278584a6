// Runs a farm bundle's model with the TVM runtime, farm and Python absent.
//
//   run_model [BUNDLE_DIR] [--device cpu|opencl|vulkan] [--repeat N]
//
// Loads BUNDLE_DIR/model_tuned.so, runs its Relax VM "main" on
// BUNDLE_DIR/inputs/0.npy, 1.npy, ... (in the model's input order), checks
// every output against BUNDLE_DIR/expected/0.npy, 1.npy, ... (onnxruntime's
// outputs on the same inputs) and prints the median latency of N runs.
// Exit status: 0 when all outputs match, 1 when one does not, 2 on bad input.
//
// The calls follow python/tvm/runtime/vm.py (VirtualMachine.__init__ and
// _setup_device): load the executable from the library, initialise the VM once
// per device (device type, device id, allocator 2 = pooled), CPU last because
// it runs the shape functions.

#include <dlpack/dlpack.h>
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/optional.h>
#include <tvm/ffi/string.h>
#include <tvm/runtime/device_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// One array read from a .npy file.
struct Npy {
  DLDataType dtype;
  std::vector<int64_t> shape;
  std::vector<char> data;  // C order, little-endian
};

// The value of `key` in the .npy header dict, e.g. "'<f4'" or "(1, 3, 16, 16)".
std::string HeaderValue(const std::string& header, const std::string& key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) throw std::runtime_error("no '" + key + "' in the header");
  at = header.find(':', at) + 1;
  while (header[at] == ' ') ++at;
  size_t end = header[at] == '(' ? header.find(')', at) + 1 : header.find_first_of(",}", at);
  return header.substr(at, end - at);
}

// Reads a .npy file, format versions 1 to 3, as numpy writes it: the magic
// "\x93NUMPY", two version bytes, the header length (2 bytes little-endian in
// version 1, 4 bytes in versions 2 and 3), then a Python dict literal with
// 'descr', 'fortran_order' and 'shape', then the raw data. Source: numpy's
// NEP 1, "A simple file format for NumPy arrays"
// (https://numpy.org/neps/nep-0001-npy-format.html).
Npy ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    throw std::runtime_error(path + ": not a .npy file");
  }
  uint32_t header_len = 0;
  unsigned char len[4] = {0, 0, 0, 0};
  in.read(reinterpret_cast<char*>(len), magic[6] == 1 ? 2 : 4);
  header_len = len[0] | (len[1] << 8) | (len[2] << 16) | (static_cast<uint32_t>(len[3]) << 24);
  std::string header(header_len, '\0');
  in.read(&header[0], header_len);
  Npy npy;
  std::string descr = HeaderValue(header, "descr");  // e.g. '<f4', '|u1'
  if (descr.size() < 5 || descr[1] == '>') {
    throw std::runtime_error(path + ": dtype " + descr + " is not little-endian");
  }
  if (HeaderValue(header, "fortran_order") != "False") {
    throw std::runtime_error(path + ": Fortran order; save it with np.ascontiguousarray");
  }
  char kind = descr[2];
  int bytes = std::atoi(descr.substr(3, descr.size() - 4).c_str());
  uint8_t code = kind == 'f' ? kDLFloat : kind == 'i' ? kDLInt : kind == 'u' ? kDLUInt
                 : kind == 'b' ? kDLBool : 255;
  if (code == 255) throw std::runtime_error(path + ": dtype " + descr + " not supported");
  npy.dtype = DLDataType{code, static_cast<uint8_t>(bytes * 8), 1};
  std::string dims = HeaderValue(header, "shape");
  std::stringstream shape(dims.substr(1, dims.size() - 2));
  std::string dim;
  int64_t count = 1;
  while (std::getline(shape, dim, ',')) {
    if (dim.find_first_not_of(' ') == std::string::npos) continue;
    npy.shape.push_back(std::stoll(dim));
    count *= npy.shape.back();
  }
  npy.data.resize(static_cast<size_t>(count) * bytes);
  if (!in.read(npy.data.data(), npy.data.size())) throw std::runtime_error(path + ": truncated");
  return npy;
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

// Element i of `data` as a double (the dtypes ReadNpy accepts).
double At(const char* data, DLDataType dtype, size_t i) {
  switch (dtype.code * 100 + dtype.bits) {
    case kDLFloat * 100 + 32: return reinterpret_cast<const float*>(data)[i];
    case kDLFloat * 100 + 64: return reinterpret_cast<const double*>(data)[i];
    case kDLInt * 100 + 8: return reinterpret_cast<const int8_t*>(data)[i];
    case kDLInt * 100 + 32: return reinterpret_cast<const int32_t*>(data)[i];
    case kDLInt * 100 + 64: return static_cast<double>(reinterpret_cast<const int64_t*>(data)[i]);
    case kDLUInt * 100 + 8: case kDLBool * 100 + 8: return reinterpret_cast<const uint8_t*>(data)[i];
    default: throw std::runtime_error("cannot compare this output dtype");
  }
}

// A TVM runtime function registered under `name` (the ones tvm.runtime's Python
// Tensor calls: python/tvm/runtime/_tensor.py). The wheel's tvm/runtime/tensor.h
// needs headers the wheel leaves out, so the program goes through these.
tvm::ffi::Function Global(const char* name) {
  auto function = tvm::ffi::Function::GetGlobal(name);
  if (!function) throw std::runtime_error(std::string("the TVM runtime has no ") + name);
  return *function;
}

// The outputs of "main": one tensor, or a tuple of them (nested tuples flattened).
void Flatten(const tvm::ffi::Any& value, std::vector<tvm::ffi::Tensor>* out) {
  if (auto tensor = value.try_cast<tvm::ffi::Tensor>()) {
    out->push_back(*tensor);
    return;
  }
  for (const tvm::ffi::Any& item : value.cast<tvm::ffi::Array<tvm::ffi::Any>>()) Flatten(item, out);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = ".";
  std::string device_name = FARM_DEVICE;  // set by CMakeLists.txt from the bundle's target
  int repeat = 10;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--device" && i + 1 < argc) {
      device_name = argv[++i];
    } else if (arg == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      dir = arg;
    }
  }
  DLDeviceType device_type = device_name == "opencl" ? kDLOpenCL
                             : device_name == "vulkan" ? kDLVulkan : kDLCPU;
  DLDevice device{device_type, 0};
  try {
    auto t0 = std::chrono::steady_clock::now();
    tvm::ffi::Module lib = tvm::ffi::Module::LoadFromFile(dir + "/model_tuned.so");
    tvm::ffi::Module vm = lib->GetFunction("vm_load_executable").value()().cast<tvm::ffi::Module>();
    const int pooled = 2;
    if (device_type == kDLCPU) {
      vm->GetFunction("vm_initialization").value()(static_cast<int>(kDLCPU), 0, pooled);
    } else {
      vm->GetFunction("vm_initialization").value()(static_cast<int>(device_type), 0, pooled,
                                                    static_cast<int>(kDLCPU), 0, pooled);
    }
    tvm::ffi::Function run = vm->GetFunction("main").value();

    tvm::ffi::Function alloc = Global("runtime.TVMTensorAllocWithScope");
    tvm::ffi::Function copy_from = Global("runtime.TVMTensorCopyFromBytes");
    tvm::ffi::Function copy_to = Global("runtime.TVMTensorCopyToBytes");
    std::vector<tvm::ffi::Any> args;
    for (int i = 0; Exists(dir + "/inputs/" + std::to_string(i) + ".npy"); ++i) {
      Npy npy = ReadNpy(dir + "/inputs/" + std::to_string(i) + ".npy");
      tvm::ffi::Shape shape(npy.shape.begin(), npy.shape.end());
      auto input = alloc(shape, npy.dtype, device, tvm::ffi::Optional<tvm::ffi::String>())
                       .cast<tvm::ffi::Tensor>();
      copy_from(input, static_cast<void*>(npy.data.data()), static_cast<int64_t>(npy.data.size()));
      args.emplace_back(input);
    }
    std::vector<tvm::ffi::AnyView> views(args.begin(), args.end());
    tvm::ffi::Any result;
    auto call = [&]() {
      run.CallPacked(views.data(), static_cast<int>(views.size()), &result);
      tvm::runtime::DeviceAPI::Get(device)->StreamSync(device, nullptr);
    };
    call();
    double load_ms = std::chrono::duration<double, std::milli>(
        std::chrono::steady_clock::now() - t0).count();

    std::vector<double> runs_ms;
    for (int i = 0; i < repeat; ++i) {
      auto start = std::chrono::steady_clock::now();
      call();
      runs_ms.push_back(std::chrono::duration<double, std::milli>(
          std::chrono::steady_clock::now() - start).count());
    }
    std::sort(runs_ms.begin(), runs_ms.end());

    std::vector<tvm::ffi::Tensor> outputs;
    Flatten(result, &outputs);
    bool match = true;
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string path = dir + "/expected/" + std::to_string(i) + ".npy";
      if (!Exists(path)) continue;
      Npy expected = ReadNpy(path);
      const tvm::ffi::Tensor& output = outputs[i];
      std::vector<char> got(expected.data.size());
      int64_t count = output.numel();
      if (static_cast<size_t>(count * ((output.dtype().bits + 7) / 8)) != got.size()) {
        std::printf("output %zu: size differs from %s\n", i, path.c_str());
        match = false;
        continue;
      }
      copy_to(output, static_cast<void*>(got.data()), static_cast<int64_t>(got.size()));
      // numpy.allclose's rule, |got - expected| <= atol + rtol * |expected|.
      const double rtol = 1e-4, atol = 1e-5;
      double max_error = 0.0;
      bool ok = true;
      for (int64_t j = 0; j < count; ++j) {
        double g = At(got.data(), output.dtype(), j), e = At(expected.data.data(), expected.dtype, j);
        max_error = std::max(max_error, std::fabs(g - e));
        ok = ok && std::fabs(g - e) <= atol + rtol * std::fabs(e);
      }
      std::printf("output %zu: %s, max abs error %.3g\n", i, ok ? "matches" : "DIFFERS", max_error);
      match = match && ok;
    }
    std::printf("load and first run: %.3f ms\n", load_ms);
    std::printf("latency: median %.4f ms over %d runs on %s\n", runs_ms[runs_ms.size() / 2],
                repeat, device_name.c_str());
    return match ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "run_model: %s\n", error.what());
    return 2;
  }
}
