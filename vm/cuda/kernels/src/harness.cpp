/* harness.cpp: host-only. Replays a recorded list of launches (written by the
 * Go tests, see sanitize_test.go) under AddressSanitizer and
 * UndefinedBehaviorSanitizer: every buffer is malloc'ed at exactly its
 * recorded size, so a kernel reading or writing one element past a tensor
 * is reported, as is any undefined arithmetic (overflow, bad shifts).
 *
 * Format (little endian): "OOCR", u32 nbufs, {u64 size, bytes}, u32 ncalls,
 * {u32 len, name, u32 grid[3], u32 block[3], u32 nparams,
 *  {u8 kind: 0 = pointer {u32 buf, u64 offset}, 1 = value {u32 len, bytes}}}. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <string>

struct ooc_host_entry {
  const char *name;
  void (*fn)(const unsigned int *, const unsigned int *, unsigned int, void **);
};
extern "C" const ooc_host_entry ooc_host_table[];

static FILE *in;
static void need(void *p, size_t n) {
  if (fread(p, 1, n, in) != n) {
    fprintf(stderr, "harness: short replay file\n");
    exit(2);
  }
}
static uint32_t u32() { uint32_t v; need(&v, 4); return v; }
static uint64_t u64() { uint64_t v; need(&v, 8); return v; }

int main(int argc, char **argv) {
  if (argc != 2 || !(in = fopen(argv[1], "rb"))) {
    fprintf(stderr, "usage: harness replay-file\n");
    return 2;
  }
  char magic[4];
  need(magic, 4);
  if (memcmp(magic, "OOCR", 4) != 0) {
    fprintf(stderr, "harness: not a replay file\n");
    return 2;
  }
  std::vector<char *> bufs(u32());
  for (auto &b : bufs) {
    uint64_t n = u64();
    b = (char *)malloc(n ? n : 1);
    need(b, n);
  }
  uint32_t calls = u32();
  for (uint32_t c = 0; c < calls; c++) {
    std::string name(u32(), '\0');
    need(&name[0], name.size());
    unsigned grid[3], block[3];
    for (auto &g : grid) g = u32();
    for (auto &b : block) b = u32();
    uint32_t np = u32();
    std::vector<std::vector<char>> vals(np);
    std::vector<void *> params(np);
    for (uint32_t i = 0; i < np; i++) {
      uint8_t kind;
      need(&kind, 1);
      if (kind == 0) {
        uint32_t b = u32();
        uint64_t off = u64();
        char *p = bufs.at(b) + off;
        vals[i].resize(8);
        memcpy(vals[i].data(), &p, 8);
      } else {
        vals[i].resize(u32());
        need(vals[i].data(), vals[i].size());
      }
      params[i] = vals[i].data();
    }
    const ooc_host_entry *e = ooc_host_table;
    while (e->name && name != e->name) e++;
    if (!e->name) {
      fprintf(stderr, "harness: no kernel %s\n", name.c_str());
      return 2;
    }
    e->fn(grid, block, 0, params.data());
  }
  for (auto b : bufs) free(b);
  printf("harness: %u launches replayed\n", calls);
  return 0;
}
