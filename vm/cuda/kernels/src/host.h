/* host.h: runs CUDA kernels on the host, for tests without a GPU.
 *
 * A launch runs the kernel once for every (block, thread) of the grid, with
 * blockIdx/threadIdx/blockDim/gridDim as thread-local variables the launcher
 * sets. Kernels without barriers run as plain nested loops. Kernels that
 * synchronise (__syncthreads, spelled OOC_BARRIER) run each block's threads
 * as fibers (a small stack switch on x86-64, ucontext elsewhere and in the
 * sanitizer build): every fiber runs until it reaches the barrier, then
 * the next one runs, and only when all have arrived does any continue, which
 * is the barrier's contract. __shared__ variables are thread_local statics:
 * one copy per OS thread, shared by the fibers of the block that is running,
 * reused by the next block (as on a GPU, nothing carries over that a kernel
 * may rely on).
 *
 * What this cannot show: warps, timing, memory coalescing, the GPU's memory
 * model. Threads never run concurrently here, so a race shows only as a
 * result that depends on the order threads run in: ooc_host_set_order(1)
 * runs blocks and the threads between barriers in reverse, and the tests
 * compare the two orders bit for bit. */
#ifndef OOC_HOST_H
#define OOC_HOST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <atomic>
#include <type_traits>

#define __global__
#define __device__
#define __shared__ static thread_local

struct ooc_uint3 {
  unsigned x, y, z;
};
static thread_local ooc_uint3 threadIdx, blockIdx, blockDim, gridDim;

static std::atomic<int> ooc_order{0};

extern "C" void ooc_host_set_order(int reverse) { ooc_order.store(reverse); }

[[noreturn]] static void ooc_host_fail(const char *what) {
  fprintf(stderr, "ooc host kernel: %s\n", what);
  fflush(stderr);
  abort();
}

#define OOC_REQUIRE(cond)                                                      \
  do {                                                                         \
    if (!(cond))                                                               \
      ooc_host_fail("requirement failed: " #cond);                             \
  } while (0)

/* The launcher table of the host build (the sanitizer harness finds kernels
 * by name in it). */
struct ooc_host_entry {
  const char *name;
  void (*fn)(const unsigned int *, const unsigned int *, unsigned int, void **);
};

/* ---- fibers for kernels that synchronise ---- */

enum { OOC_MAX_THREADS = 1024, OOC_STACK = 256 << 10 };

struct ooc_fiber {
  ucontext_t ctx;
  void *sp; /* the saved stack pointer (fast switches) */
  char *stack;
  ooc_uint3 tid;
  bool done;
};

static thread_local ooc_fiber *ooc_fibers;  /* OOC_MAX_THREADS, made lazily */
static thread_local ooc_fiber *ooc_current; /* the fiber running, or null */
static thread_local void (*ooc_body_fn)(void **);
static thread_local void **ooc_body_params;

#if defined(__x86_64__) && !defined(OOC_HARNESS) && !defined(__SANITIZE_ADDRESS__)
/* Fast switches on x86-64: glibc's swapcontext saves and restores the signal
 * mask with a system call at every switch, and a barrier kernel switches
 * about ten times per thread (one per reduction round), which made the model
 * tests on the fake driver spend most of their time in the kernel. This
 * switch saves the callee-saved registers, MXCSR and the x87 control word on
 * the stack being left (the SysV ABI's whole callee-saved state) and resumes
 * the other stack; the signal mask never changes here, so nothing is lost.
 * The sanitizer harness keeps ucontext (AddressSanitizer follows its stack
 * switches). */
#define OOC_FAST_FIBERS 1
extern "C" void ooc_ctx_switch(void **save_sp, void *to_sp);
__asm__(".text\n"
        ".globl ooc_ctx_switch\n"
        ".hidden ooc_ctx_switch\n"
        ".type ooc_ctx_switch,@function\n"
        "ooc_ctx_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size ooc_ctx_switch, .-ooc_ctx_switch\n");

static thread_local void *ooc_sched_sp;

static void ooc_host_barrier() {
  if (!ooc_current)
    ooc_host_fail("__syncthreads in a kernel launched without barriers "
                  "(its Spec must say Barrier)");
  ooc_ctx_switch(&ooc_current->sp, ooc_sched_sp);
}

[[noreturn]] static void ooc_fiber_main() {
  ooc_body_fn(ooc_body_params);
  ooc_current->done = true;
  void *dead;
  ooc_ctx_switch(&dead, ooc_sched_sp);
  ooc_host_fail("a finished fiber was resumed");
}

/* ooc_fiber_start lays out a new stack as ooc_ctx_switch leaves one: the
 * control words, six registers, and ooc_fiber_main as the return address,
 * with the stack aligned as at a function's entry. */
static void ooc_fiber_start(ooc_fiber *f) {
  unsigned long long *top = (unsigned long long *)(((unsigned long long)(f->stack + OOC_STACK)) & ~15ULL);
  unsigned mx = 0;
  unsigned short cw = 0;
  __asm__ volatile("stmxcsr %0" : "=m"(mx));
  __asm__ volatile("fnstcw %0" : "=m"(cw));
  unsigned long long *sp = top - 1; /* the fake caller's return address slot */
  *sp = 0;
  *--sp = (unsigned long long)(void *)ooc_fiber_main;
  for (int r = 0; r < 6; r++)
    *--sp = 0;
  *--sp = (unsigned long long)mx | ((unsigned long long)cw << 32);
  f->sp = sp;
}

static void ooc_fiber_resume(ooc_fiber *f) { ooc_ctx_switch(&ooc_sched_sp, f->sp); }
#else
static thread_local ucontext_t ooc_sched;

static void ooc_host_barrier() {
  if (!ooc_current)
    ooc_host_fail("__syncthreads in a kernel launched without barriers "
                  "(its Spec must say Barrier)");
  swapcontext(&ooc_current->ctx, &ooc_sched);
}

static void ooc_fiber_main() {
  ooc_body_fn(ooc_body_params);
  ooc_current->done = true;
  /* returning resumes uc_link, the scheduler */
}

static void ooc_fiber_start(ooc_fiber *f) {
  getcontext(&f->ctx);
  f->ctx.uc_stack.ss_sp = f->stack;
  f->ctx.uc_stack.ss_size = OOC_STACK;
  f->ctx.uc_link = &ooc_sched;
  makecontext(&f->ctx, ooc_fiber_main, 0);
}

static void ooc_fiber_resume(ooc_fiber *f) { swapcontext(&ooc_sched, &f->ctx); }
#endif

static void ooc_run_block_fibers(unsigned nthreads) {
  if (!ooc_fibers) {
    ooc_fibers = (ooc_fiber *)calloc(OOC_MAX_THREADS, sizeof(ooc_fiber));
    if (!ooc_fibers)
      ooc_host_fail("out of memory for fibers");
  }
  for (unsigned i = 0; i < nthreads; i++) {
    ooc_fiber *f = &ooc_fibers[i];
    if (!f->stack) {
      f->stack = (char *)mmap(0, OOC_STACK, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (f->stack == MAP_FAILED)
        ooc_host_fail("cannot map a fiber stack");
    }
    unsigned bx = blockDim.x, by = blockDim.y;
    f->tid.x = i % bx;
    f->tid.y = (i / bx) % by;
    f->tid.z = i / (bx * by);
    f->done = false;
    ooc_fiber_start(f);
  }
  /* Rounds: every live fiber runs to its next barrier (or its end). */
  for (;;) {
    unsigned live = 0, finished = 0;
    for (unsigned k = 0; k < nthreads; k++) {
      unsigned i = ooc_order.load() ? nthreads - 1 - k : k;
      ooc_fiber *f = &ooc_fibers[i];
      if (f->done)
        continue;
      threadIdx = f->tid;
      ooc_current = f;
      ooc_fiber_resume(f);
      ooc_current = 0;
      if (f->done)
        finished++;
      else
        live++;
    }
    if (live == 0)
      return;
    if (finished != 0)
      ooc_host_fail("some threads of a block finished while others wait at a "
                    "barrier (divergent __syncthreads)");
  }
}

/* ooc_launch runs body (the kernel with its arguments unpacked from params)
 * for every thread of the grid. */
static void ooc_launch(const unsigned grid[3], const unsigned block[3],
                       unsigned sharedBytes, bool barrier,
                       void (*body)(void **), void **params) {
  (void)sharedBytes; /* no kernel here uses dynamic shared memory */
  unsigned long long nblocks = (unsigned long long)grid[0] * grid[1] * grid[2];
  unsigned long long nthreads =
      (unsigned long long)block[0] * block[1] * block[2];
  if (nblocks == 0 || nthreads == 0)
    return;
  if (nthreads > OOC_MAX_THREADS)
    ooc_host_fail("more than 1024 threads per block");
  gridDim = {grid[0], grid[1], grid[2]};
  blockDim = {block[0], block[1], block[2]};
  bool rev = ooc_order.load() != 0;
  for (unsigned long long kb = 0; kb < nblocks; kb++) {
    unsigned long long b = rev ? nblocks - 1 - kb : kb;
    blockIdx.x = (unsigned)(b % grid[0]);
    blockIdx.y = (unsigned)((b / grid[0]) % grid[1]);
    blockIdx.z = (unsigned)(b / ((unsigned long long)grid[0] * grid[1]));
    if (barrier) {
      ooc_body_fn = body;
      ooc_body_params = params;
      ooc_run_block_fibers((unsigned)nthreads);
      continue;
    }
    for (unsigned long long kt = 0; kt < nthreads; kt++) {
      unsigned long long t = rev ? nthreads - 1 - kt : kt;
      threadIdx.x = (unsigned)(t % block[0]);
      threadIdx.y = (unsigned)((t / block[0]) % block[1]);
      threadIdx.z = (unsigned)(t / ((unsigned long long)block[0] * block[1]));
      body(params);
    }
  }
}

#endif
