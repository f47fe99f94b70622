/* The hook's allocator in its static build (docs/hook.md, "A YAML spec"): libyaml
 * allocates and frees every token, scalar and event, and glibc's malloc was a sixth of
 * a YAML spec's start.  The hook does one job and exits, so blocks are cut from a bump
 * arena (its first 256 KiB in .bss: no system call for a usual start), a freed block of
 * up to 4 KiB goes on the list of its 16-byte size class for the next of that class
 * (memory stays bounded by what is live at once), the room of a larger one (a parser's
 * buffers) serves later blocks from its front, and nothing is given back to the kernel
 * before the exit.
 * Single-threaded, as the hook is.  The dynamic build (.deb, .rpm) keeps the libc's, and
 * so do the sanitizer builds (ASan brings its own). */
#if defined(XPU_CDI_ARENA_MALLOC) && !defined(__SANITIZE_ADDRESS__)

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ALIGN 16                      /* what malloc guarantees on x86_64 and aarch64 */
#define HEAD 16                       /* a block's capacity, kept before it (one ALIGN) */
#define REUSED 4096                   /* blocks up to this capacity are reused by class */
#define FIRST ((size_t)256 << 10)     /* served from .bss */
#define CHUNK ((size_t)1 << 20)       /* each later mapping; a larger block gets its own */
#define LARGEST ((size_t)PTRDIFF_MAX / 2)

static _Alignas(ALIGN) unsigned char first[FIRST];
static unsigned char *next = first, *end = first + FIRST;
static void *freed[REUSED / ALIGN + 1];   /* per capacity class: a list linked through the blocks */
/* Freed larger blocks (a parser's buffers, once it is done), later blocks cut from their
 * front: the pages written there are reused instead of new ones touched, a page fault each. */
#define SPARES 8
static struct {
    unsigned char *p, *end;
} spare[SPARES];
static int nspare;

static size_t capacity_of(size_t n)
{
    return n ? (n + ALIGN - 1) & ~(size_t)(ALIGN - 1) : ALIGN;
}

static size_t *head_of(void *p)
{
    return (size_t *)((unsigned char *)p - HEAD);
}

/* A new block of capacity *cap* (a multiple of ALIGN), or NULL when the kernel has no memory. */
static void *cut(size_t cap)
{
    size_t need = cap + HEAD;
    for (int i = 0; i < nspare; i++)
        if ((size_t)(spare[i].end - spare[i].p) >= need) {
            unsigned char *b = spare[i].p;
            spare[i].p += need;
            if ((size_t)(spare[i].end - spare[i].p) < ALIGN + HEAD)   /* no block fits in what is left */
                spare[i] = spare[--nspare];
            *(size_t *)b = cap;
            return b + HEAD;
        }
    if ((size_t)(end - next) < need) {
        size_t len = need > CHUNK ? (need + 4095) & ~(size_t)4095 : CHUNK;
        unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        if (need > CHUNK) {   /* its own mapping: the current chunk goes on serving small blocks */
            *(size_t *)m = len - HEAD;
            return m + HEAD;
        }
        next = m;
        end = m + len;
    }
    unsigned char *b = next;
    next += need;
    *(size_t *)b = cap;
    return b + HEAD;
}

/* malloc and free under names of their own: calls between the functions below must not be
 * taken for the builtins', whose memory the compiler assumes has nothing before it */
static void *allocate(size_t size)
{
    if (size > LARGEST) {
        errno = ENOMEM;
        return NULL;
    }
    size_t cap = capacity_of(size);
    if (cap <= REUSED && freed[cap / ALIGN]) {
        void *p = freed[cap / ALIGN];
        freed[cap / ALIGN] = *(void **)p;
        return p;
    }
    void *p = cut(cap);
    if (!p)
        errno = ENOMEM;
    return p;
}

static void release(void *p)
{
    if (!p)
        return;
    size_t cap = *head_of(p);
    if (cap <= REUSED) {
        *(void **)p = freed[cap / ALIGN];
        freed[cap / ALIGN] = p;
    } else if (nspare < SPARES) {
        spare[nspare].p = (unsigned char *)head_of(p);
        spare[nspare++].end = (unsigned char *)p + cap;
    }
}

void *calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = allocate(total);
    if (p)
        memset(p, 0, total);   /* a reused block is not zero */
    return p;
}

void *realloc(void *p, size_t size)
{
    if (!p)
        return allocate(size);
    if (size == 0) {   /* as glibc's: frees, returns NULL */
        release(p);
        return NULL;
    }
    if (size > LARGEST) {
        errno = ENOMEM;
        return NULL;
    }
    size_t cap = *head_of(p), want = capacity_of(size);
    if (want <= cap)
        return p;
    if ((unsigned char *)p + cap == next && (size_t)(end - next) >= want - cap) {   /* the last block grows */
        next += want - cap;
        *head_of(p) = want;
        return p;
    }
    void *q = allocate(size);
    if (!q)
        return NULL;
    memcpy(q, p, cap);
    release(p);
    return q;
}

void *memalign(size_t align, size_t size)
{
    if (align <= ALIGN)
        return allocate(size);
    if (align & (align - 1) || size > LARGEST || align > LARGEST) {
        errno = EINVAL;
        return NULL;
    }
    unsigned char *b = allocate(size + align);
    if (!b)
        return NULL;
    unsigned char *a = (unsigned char *)(((uintptr_t)b + align - 1) & ~(uintptr_t)(align - 1));
    if (a != b)   /* a - b is a multiple of ALIGN: room for a's head inside b, and a block of its own */
        *head_of(a) = *head_of(b) - (size_t)(a - b);
    return a;
}

int posix_memalign(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || align & (align - 1))
        return EINVAL;
    void *p = memalign(align, size);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t size)
{
    return memalign(align, size);
}

void *valloc(size_t size)
{
    return memalign(4096, size);
}

void *pvalloc(size_t size)
{
    return memalign(4096, (size + 4095) & ~(size_t)4095);
}

/* The usual call (libyaml's tokens, scalars and events): a reused block of a small class,
 * taken here without allocate's checks.  A size near SIZE_MAX wraps to class 0 and takes the
 * checked way, as size 0 does. */
void *malloc(size_t size)
{
    size_t k = (size + ALIGN - 1) / ALIGN;
    void *p;

    if (k - 1 < REUSED / ALIGN && (p = freed[k]) != NULL) {
        freed[k] = *(void **)p;
        return p;
    }
    return allocate(size);
}

void free(void *p)
{
    release(p);
}

size_t malloc_usable_size(void *p)
{
    return p ? *head_of(p) : 0;
}

#else
typedef int xf_alloc_unused;   /* an empty unit is not ISO C */
#endif
