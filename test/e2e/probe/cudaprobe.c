// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// cudaprobe: what a CUDA application finds in its container. It loads
// libcuda.so.1 and libnvidia-ml.so.1 by soname (no LD_LIBRARY_PATH: the
// container's ld cache, which nvidia-cdi-hook's update-ldcache wrote,
// resolves them), prints where each came from, calls the CUDA driver API
// (cuDriverGetVersion, cuInit) and lists the NVIDIA device nodes in /dev.
// One line per fact, "key value...", for test/e2e/userspace_test.go. With
// --wait it then sleeps until SIGTERM, so that the pod stays while the
// test looks at the node.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../probe/nvprobe.h"

typedef int (*cu_init_t)(unsigned int);
typedef int (*cu_version_t)(int *);

// style: CUDAPROBE_LDCACHE may name another ld cache, a missing entry says
// why, every cache entry of a soname is listed, and each library's size
// and hash let the test tell it is the driver root's very file.
static const struct nvprobe_style style = {
    .ldcache_env = "CUDAPROBE_LDCACHE",
    .ldcache_reason = 1,
    .ldcache_every = 1,
    .lib_hash = 1,
};

static void on_term(int sig) { (void)sig; _exit(0); }

int main(int argc, char **argv) {
  nvprobe_ldcache("libcuda.so.1", &style);
  nvprobe_ldcache("libnvidia-ml.so.1", &style);
  void *ml = nvprobe_load("libnvidia-ml.so.1", &style);
  (void)ml;
  void *cuda = nvprobe_load("libcuda.so.1", &style);
  if (cuda) {
    cu_version_t ver = (cu_version_t)dlsym(cuda, "cuDriverGetVersion");
    cu_init_t init = (cu_init_t)dlsym(cuda, "cuInit");
    int v = 0;
    if (ver) { int r = ver(&v); printf("cuDriverGetVersion %d %d\n", r, v); }
    if (init) printf("cuInit %d\n", init(0));
  }
  const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
  printf("mps %s\n", pipe ? pipe : "none");
  nvprobe_devices("/dev");
  printf("done\n");
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "--wait") == 0) {
    signal(SIGTERM, on_term);
    for (;;) pause();
  }
  return 0;
}
