/* hook/alloc.c, the static hook's allocator, on its own (tests/c/test_hook_alloc.py): blocks
 * aligned and apart, a freed small block reused by its size class, a freed large one's room
 * serving later blocks, realloc keeping the
 * contents (in place for the last block, by copy otherwise), calloc zeroing a reused block,
 * memalign's alignment, overflowing sizes refused, and memory bounded by what is live.
 * TAP output, as tests/c/lib_units.c. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cases, failed;

static void ok(int cond, const char *what)
{
    cases++;
    if (!cond)
        failed++;
    printf("%s %d - %s\n", cond ? "ok" : "not ok", cases, what);
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(void)
{
    unsigned char *a = malloc(24), *b = malloc(24);
    ok(a && b && ((uintptr_t)a % 16) == 0 && ((uintptr_t)b % 16) == 0, "blocks are 16-byte aligned");
    ok(b >= a + 24 || a >= b + 24, "two live blocks do not overlap");
    ok(malloc_usable_size(a) >= 24, "a block holds what was asked");
    memset(a, 0xAB, 24);
    free(a);
    unsigned char *c = malloc(20);
    ok(c == a, "a freed block is reused by the next of its size class");
    unsigned char *z = calloc(3, 8);
    ok(z != NULL, "calloc");
    free(c);
    z = calloc(4, 5);   /* the same class as the dirty block just freed */
    int zero = z != NULL;
    for (int i = 0; zero && i < 20; i++)
        zero = z[i] == 0;
    ok(zero, "calloc zeroes a reused block");

    unsigned char *r = malloc(40);
    for (int i = 0; i < 40; i++)
        r[i] = (unsigned char)i;
    unsigned char *r2 = realloc(r, 4000);
    int kept = r2 != NULL;
    for (int i = 0; kept && i < 40; i++)
        kept = r2[i] == i;
    ok(kept, "realloc keeps the contents");
    unsigned char *other = malloc(16);
    r2[3999] = 7;
    unsigned char *r3 = realloc(r2, 3 << 20);   /* past a chunk: its own mapping, by copy */
    kept = r3 != NULL && r3[3999] == 7;
    for (int i = 0; kept && i < 40; i++)
        kept = r3[i] == i;
    ok(kept && other != NULL, "realloc to a large block copies");
    r3[(3 << 20) - 1] = 1;
    ok(realloc(r3, 100) == r3, "realloc to less keeps the block");
    errno = 0;
    ok(realloc(NULL, 0) != NULL && malloc(0) != NULL, "zero-sized blocks are blocks");

    void *al = memalign(4096, 100);
    ok(al && ((uintptr_t)al % 4096) == 0 && malloc_usable_size(al) >= 100, "memalign aligns");
    free(al);
    void *pm = NULL;
    ok(posix_memalign(&pm, 64, 10) == 0 && ((uintptr_t)pm % 64) == 0, "posix_memalign aligns");
    ok(posix_memalign(&pm, 24, 10) == EINVAL, "posix_memalign refuses an alignment not a power of two");
    ok(aligned_alloc(256, 512) != NULL, "aligned_alloc");

    volatile size_t huge = SIZE_MAX - 8, half = SIZE_MAX / 2;   /* volatile: not folded into a warning */
    errno = 0;
    ok(malloc(huge) == NULL && errno == ENOMEM, "a size near SIZE_MAX is ENOMEM");
    ok(calloc(half, 4) == NULL, "calloc refuses a product that overflows");
    ok(realloc(malloc(8), huge) == NULL, "realloc refuses a size near SIZE_MAX");

    unsigned char *big = malloc(20000);
    memset(big, 1, 20000);
    uintptr_t lo = (uintptr_t)big, hi = lo + 20000;   /* kept as numbers: big is freed */
    free(big);
    uintptr_t s1 = (uintptr_t)malloc(3000);   /* a class no earlier case freed a block of */
    uintptr_t s2 = (uintptr_t)malloc(5000);   /* above the classes */
    ok(s1 >= lo && s1 + 3000 <= hi && s2 >= lo && s2 + 5000 <= hi, "a freed large block's room serves the next blocks");
    ok(s2 >= s1 + 3000 || s1 >= s2 + 5000, "blocks cut from a freed block do not overlap");
    long grown = rss_kib();
    for (int i = 0; i < 1000; i++) {   /* a parser's buffers, asked and freed again and again */
        unsigned char *volatile buf = malloc(100000);   /* volatile: the pair is not elided */
        memset(buf, 1, 100000);
        free(buf);
    }
    ok(rss_kib() - grown < 1024, "a freed large block's room is asked again, not new memory");

    long before = rss_kib();
    for (int i = 0; i < 1000000; i++) {   /* libyaml's pattern: a token, an event, freed */
        void *t = malloc((size_t)(16 + i % 200)), *e = malloc(80);
        free(e);
        free(t);
    }
    ok(rss_kib() - before < 1024, "a million freed small blocks take no more memory");

    printf("1..%d\n", cases);
    return failed != 0;
}
