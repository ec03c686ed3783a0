// oltrain: the end-to-end trainer binary, CPU placements (oltrain_main.h has the flags and
// modes; oltrain_cuda is the same with the CUDA backend).
#include "tools/train/oltrain_main.h"

int main(int argc, char** argv) { return oneflow_like::OltrainMain(argc, argv, /*device_backend=*/nullptr); }
