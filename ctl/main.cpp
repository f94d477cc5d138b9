#include "ctl/commands.hpp"

int main(int argc, char** argv) { return gpurun::ctl_main(argc, argv); }
