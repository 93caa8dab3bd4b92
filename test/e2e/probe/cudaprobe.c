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
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

typedef int (*cu_init_t)(unsigned int);
typedef int (*cu_version_t)(int *);

// fnv64 hashes a file (FNV-1a, 64 bit), so that the test can tell the
// container's library is the driver root's very file.
static int fnv64(const char *path, uint64_t *out, long long *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  uint64_t h = 14695981039346656037ULL; // FNV-1a 64-bit offset basis
  long long n = 0;
  unsigned char buf[65536];
  size_t r;
  while ((r = fread(buf, 1, sizeof buf, f)) > 0) {
    for (size_t i = 0; i < r; i++) h = (h ^ buf[i]) * 1099511628211ULL;
    n += r;
  }
  fclose(f);
  *out = h;
  *size = n;
  return 0;
}

// ldcache prints the ld.so.cache entry of a soname (glibc's
// "glibc-ld.so.cache1.1" format: a 48-byte header, then 24-byte entries
// whose key and value are string offsets from the header's start).
static void ldcache(const char *soname) {
  const char *cache = getenv("CUDAPROBE_LDCACHE");
  FILE *f = fopen(cache ? cache : "/etc/ld.so.cache", "rb");
  if (!f) { printf("ldcache %s none (no /etc/ld.so.cache)\n", soname); return; }
  static char data[4 << 20];
  size_t n = fread(data, 1, sizeof data, f);
  fclose(f);
  const char magic[] = "glibc-ld.so.cache1.1";
  char *base = memmem(data, n, magic, sizeof magic - 1);
  if (!base || base + 48 > data + n) { printf("ldcache %s none (unknown format)\n", soname); return; }
  uint32_t nlibs;
  memcpy(&nlibs, base + 20, 4);
  int found = 0;
  for (uint32_t i = 0; i < nlibs; i++) {
    char *e = base + 48 + (size_t)i * 24;
    if (e + 24 > data + n) break;
    uint32_t key, value;
    memcpy(&key, e + 4, 4);
    memcpy(&value, e + 8, 4);
    if (base + key >= data + n || base + value >= data + n) continue;
    if (strcmp(base + key, soname) == 0) {
      printf("ldcache %s %s\n", soname, base + value);
      found = 1;
    }
  }
  if (!found) printf("ldcache %s none\n", soname);
}

static void *load(const char *soname) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
  if (!h) { printf("lib %s error %s\n", soname, dlerror()); return NULL; }
  struct link_map *lm = NULL;
  char real[PATH_MAX] = "?";
  uint64_t hash = 0;
  long long size = -1;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && realpath(lm->l_name, real)) fnv64(real, &hash, &size);
  printf("lib %s %s %s %lld %016llx\n", soname, lm ? lm->l_name : "?", real, size, (unsigned long long)hash);
  return h;
}

static void devices(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "nvidia", 6) != 0) continue;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(p, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) { devices(p); continue; }
    if (S_ISCHR(st.st_mode)) printf("dev %s %u:%u\n", p, major(st.st_rdev), minor(st.st_rdev));
    else printf("dev %s not-a-device\n", p);
  }
  closedir(d);
}

static void on_term(int sig) { (void)sig; _exit(0); }

int main(int argc, char **argv) {
  ldcache("libcuda.so.1");
  ldcache("libnvidia-ml.so.1");
  void *ml = load("libnvidia-ml.so.1");
  (void)ml;
  void *cuda = load("libcuda.so.1");
  if (cuda) {
    cu_version_t ver = (cu_version_t)dlsym(cuda, "cuDriverGetVersion");
    cu_init_t init = (cu_init_t)dlsym(cuda, "cuInit");
    int v = 0;
    if (ver) { int r = ver(&v); printf("cuDriverGetVersion %d %d\n", r, v); }
    if (init) printf("cuInit %d\n", init(0));
  }
  const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
  printf("mps %s\n", pipe ? pipe : "none");
  devices("/dev");
  printf("done\n");
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "--wait") == 0) {
    signal(SIGTERM, on_term);
    for (;;) pause();
  }
  return 0;
}
