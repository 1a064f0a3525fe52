// The two backends every test of the test_cuda_ops binary compares: the CPU reference and the
// GPU under test. One of each for the whole binary (cuda_test_backends.cpp), made on first use
// and never destroyed: no second CUDA context, no CUDA teardown order to get wrong at exit.
#pragma once
#include "backend/backend.h"

namespace dtrain::cuda_test {

Backend& cpu_reference();  // the CPU backend, up to 8 threads
Backend& gpu();            // GPU 0, TF32 off

}  // namespace dtrain::cuda_test
