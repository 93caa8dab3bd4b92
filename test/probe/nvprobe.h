// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// nvprobe.h: what the two container probes print about the NVIDIA files a
// container finds: its device nodes, the ld.so.cache entry of a soname and
// where dlopen by soname found a library. Shared by the e2e image's
// test/e2e/probe/cudaprobe.c and gpu-smoke's test/gpusmoke/probe/kernelprobe.c,
// which include it as "../../probe/nvprobe.h". Header-only (static
// functions), so that each probe is still built by one gcc command with
// nothing else to link (hack/cluster/images.sh, hack/smoke-container.sh).
//
// Each probe's wording is parsed by its own tests (test/e2e/probe_parse_test.go,
// internal/gpusmoke/probe.go), and the two differ in small ways: where they
// differ, struct nvprobe_style says which wording a probe prints, so that
// neither probe's output changed when this code was shared.
#ifndef GDRA_NVPROBE_H
#define GDRA_NVPROBE_H

#ifndef _GNU_SOURCE
#error "define _GNU_SOURCE before the first #include: nvprobe.h needs memmem and dlinfo"
#endif

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

struct nvprobe_style {
  // ldcache_env names an environment variable whose value, when set,
  // replaces /etc/ld.so.cache as the file nvprobe_ldcache reads; NULL: none.
  const char *ldcache_env;
  // ldcache_reason says why an entry is none when there is no readable
  // cache ("none (no /etc/ld.so.cache)") or it is not glibc's format
  // ("none (unknown format)"); otherwise both print a plain "none".
  int ldcache_reason;
  // ldcache_every prints every entry of the soname in the cache; otherwise
  // only the first.
  int ldcache_every;
  // lib_hash appends the loaded file's size and FNV-1a hash to each "lib"
  // line (size -1 and hash 0 when its real path is not found); otherwise a
  // real path that is not found prints as "?".
  int lib_hash;
};

// nvprobe_fnv64 hashes a file (FNV-1a, 64 bit), so that a test can tell the
// container's library is the driver root's very file.
static int nvprobe_fnv64(const char *path, uint64_t *out, long long *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  uint64_t h = 14695981039346656037ULL; // FNV-1a 64-bit offset basis
  long long n = 0;
  unsigned char buf[65536];
  size_t r;
  while ((r = fread(buf, 1, sizeof buf, f)) > 0) {
    for (size_t i = 0; i < r; i++) h = (h ^ buf[i]) * 1099511628211ULL; // FNV 64-bit prime
    n += r;
  }
  fclose(f);
  *out = h;
  *size = n;
  return 0;
}

// nvprobe_ldcache prints "ldcache SONAME PATH" for the ld.so.cache entry of
// a soname, or "ldcache SONAME none". glibc's "glibc-ld.so.cache1.1" format
// (elf/dl-cache.h, struct cache_file_new): a 48-byte header with the entry
// count at offset 20, then 24-byte entries whose key and value are string
// offsets from the header's start.
static void nvprobe_ldcache(const char *soname, const struct nvprobe_style *s) {
  const char *cache = s->ldcache_env ? getenv(s->ldcache_env) : NULL;
  FILE *f = fopen(cache ? cache : "/etc/ld.so.cache", "rb");
  if (!f) {
    printf("ldcache %s none%s\n", soname, s->ldcache_reason ? " (no /etc/ld.so.cache)" : "");
    return;
  }
  static char data[4 << 20];
  size_t n = fread(data, 1, sizeof data, f);
  fclose(f);
  const char magic[] = "glibc-ld.so.cache1.1";
  char *base = memmem(data, n, magic, sizeof magic - 1);
  if (!base || base + 48 > data + n) {
    printf("ldcache %s none%s\n", soname, s->ldcache_reason ? " (unknown format)" : "");
    return;
  }
  uint32_t count;
  memcpy(&count, base + 20, 4);
  int found = 0;
  for (uint32_t i = 0; i < count; i++) {
    char *e = base + 48 + (size_t)i * 24;
    if (e + 24 > data + n) break;
    uint32_t key, value;
    memcpy(&key, e + 4, 4);
    memcpy(&value, e + 8, 4);
    if (base + key >= data + n || base + value >= data + n) continue;
    if (strcmp(base + key, soname) != 0) continue;
    printf("ldcache %s %s\n", soname, base + value);
    found = 1;
    if (!s->ldcache_every) break;
  }
  if (!found) printf("ldcache %s none\n", soname);
}

// nvprobe_load dlopens a soname the way an application does (no path, so
// the loader's search and the ld cache decide) and prints
// "lib SONAME LOADED REAL" (with lib_hash: "... SIZE HASH") or
// "lib SONAME error MSG". It returns the handle, NULL on error.
static void *nvprobe_load(const char *soname, const struct nvprobe_style *s) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    printf("lib %s error %s\n", soname, dlerror());
    return NULL;
  }
  struct link_map *lm = NULL;
  char real[PATH_MAX] = "?";
  int resolved = dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && realpath(lm->l_name, real);
  const char *loaded = lm ? lm->l_name : "?";
  if (!s->lib_hash) {
    // On failure glibc's realpath may leave part of a path in real.
    if (!resolved) strcpy(real, "?");
    printf("lib %s %s %s\n", soname, loaded, real);
    return h;
  }
  // cudaprobe's lines have always kept what realpath left in real on
  // failure: size -1 marks that line.
  uint64_t hash = 0;
  long long size = -1;
  if (resolved) nvprobe_fnv64(real, &hash, &size);
  printf("lib %s %s %s %lld %016llx\n", soname, loaded, real, size, (unsigned long long)hash);
  return h;
}

// nvprobe_devices prints "dev PATH MAJOR:MINOR" for each character device
// named nvidia* under dir and its nvidia* subdirectories (nvidia-caps/),
// "dev PATH not-a-device" for anything else of that name.
static void nvprobe_devices(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "nvidia", 6) != 0) continue;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(p, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) nvprobe_devices(p);
    else if (S_ISCHR(st.st_mode)) printf("dev %s %u:%u\n", p, major(st.st_rdev), minor(st.st_rdev));
    else printf("dev %s not-a-device\n", p);
  }
  closedir(d);
}

#endif
