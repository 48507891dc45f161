/* The IDX reader and the Fashion-MNIST loader (tools/train/idx.c, data.c) on
 * small files this test writes to a temporary directory, plain and gzip:
 * correct data and dimensions, sharding and scaling, and clear errors (the
 * file named, the problem named, no crash) for missing, truncated, wrong
 * magic, wrong dimensions, trailing data, label count mismatch and labels
 * out of range. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data.h"
#include "err.h"
#include "idx.h"
#include "testutil.h"

static char tmpdir[256];

/* Writes bytes to path, gzip-compressed if gz. */
static void write_bytes(const char *path, int gz, const unsigned char *buf, size_t len)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        CHECK(f != NULL);
        CHECK(len == 0 || gzwrite(f, buf, (unsigned)len) == (int)len);
        CHECK(gzclose(f) == Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        CHECK(len == 0 || fwrite(buf, 1, len, f) == len);
        CHECK(fclose(f) == 0);
    }
}

/* An IDX image: magic 00 00 type ndims, sizes, data (value(i) = i % 251);
 * keep = how many bytes of it to write (truncation), extra = bytes appended. */
static size_t make_idx(unsigned char *buf, unsigned char type, const size_t *dims, size_t ndims)
{
    size_t len = 0, count = 1;
    buf[len++] = 0;
    buf[len++] = 0;
    buf[len++] = type;
    buf[len++] = (unsigned char)ndims;
    for (size_t i = 0; i < ndims; i++) {
        buf[len++] = (unsigned char)(dims[i] >> 24);
        buf[len++] = (unsigned char)(dims[i] >> 16);
        buf[len++] = (unsigned char)(dims[i] >> 8);
        buf[len++] = (unsigned char)dims[i];
        count *= dims[i];
    }
    for (size_t i = 0; i < count; i++) buf[len++] = (unsigned char)(i % 251);
    return len;
}

static char *path_of(const char *sub, const char *name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s%s%s", tmpdir, sub, *sub ? "/" : "", name);
    return p;
}

static void expect_error(const char *path, const char *needle)
{
    idx_u8_t a;
    CHECK_MSG(idx_read_u8(path, &a) != 0, "%s: read should fail", path);
    CHECK(a.data == NULL && a.dims == NULL);
    const char *msg = tr_error();
    CHECK_MSG(strstr(msg, path) != NULL, "message does not name the file: %s", msg);
    CHECK_MSG(strstr(msg, needle) != NULL, "message \"%s\" lacks \"%s\"", msg, needle);
    printf("  ok: %s\n", msg);
}

static void test_reader(void)
{
    static unsigned char buf[1 << 16];
    const size_t dims[3] = {4, 3, 5};
    size_t len = make_idx(buf, 0x08, dims, 3);
    for (int gz = 0; gz < 2; gz++) {
        const char *p = path_of("", gz ? "good.gz" : "good");
        write_bytes(p, gz, buf, len);
        idx_u8_t a;
        CHECK_MSG(idx_read_u8(p, &a) == 0, "%s", tr_error());
        CHECK(a.ndims == 3 && a.dims[0] == 4 && a.dims[1] == 3 && a.dims[2] == 5 && a.count == 60);
        for (size_t i = 0; i < 60; i++) CHECK(a.data[i] == i % 251);
        idx_free(&a);

        /* truncated in the data, in the sizes, in the magic; empty */
        write_bytes(p = path_of("", gz ? "trunc_data.gz" : "trunc_data"), gz, buf, len - 7);
        expect_error(p, "truncated");
        write_bytes(p = path_of("", gz ? "trunc_dims.gz" : "trunc_dims"), gz, buf, 9);
        expect_error(p, "truncated");
        write_bytes(p = path_of("", gz ? "trunc_head.gz" : "trunc_head"), gz, buf, 3);
        expect_error(p, "truncated");
        write_bytes(p = path_of("", gz ? "empty.gz" : "empty"), gz, buf, 0);
        expect_error(p, "truncated");
        /* trailing bytes: the declared dimensions do not match the file */
        unsigned char *longer = malloc(len + 10);
        CHECK(longer != NULL);
        memcpy(longer, buf, len);
        memset(longer + len, 7, 10);
        write_bytes(p = path_of("", gz ? "trailing.gz" : "trailing"), gz, longer, len + 10);
        expect_error(p, "unexpected data");
        free(longer);
        /* wrong magic: another element type (int32), garbage, 0 dimensions */
        unsigned char bad[256];
        size_t blen = make_idx(bad, 0x0C, dims, 3);
        write_bytes(p = path_of("", gz ? "int32.gz" : "int32"), gz, bad, 40);
        expect_error(p, "wrong magic");
        write_bytes(p = path_of("", gz ? "garbage.gz" : "garbage"), gz, (const unsigned char *)"PK\3\4hello", 9);
        expect_error(p, "wrong magic");
        blen = make_idx(bad, 0x08, dims, 0);
        write_bytes(p = path_of("", gz ? "nodims.gz" : "nodims"), gz, bad, blen);
        expect_error(p, "wrong magic");
        /* a zero size */
        const size_t zdims[2] = {3, 0};
        blen = make_idx(bad, 0x08, zdims, 2);
        write_bytes(p = path_of("", gz ? "zero.gz" : "zero"), gz, bad, blen);
        expect_error(p, "wrong dimensions");
    }
    /* a gzip stream cut in the middle (the compressed bytes, not the data) */
    {
        const char *gzp = path_of("", "good.gz");
        FILE *f = fopen(gzp, "rb");
        CHECK(f != NULL);
        unsigned char z[4096];
        size_t zl = fread(z, 1, sizeof z, f);
        fclose(f);
        CHECK(zl > 20);
        const char *p = path_of("", "cut.gz");
        write_bytes(p, 0, z, zl / 2);
        expect_error(p, p); /* any clear message naming the file */
    }
    idx_u8_t a;
    errno = 0;
    CHECK(idx_read_u8(path_of("", "does-not-exist"), &a) != 0);
    CHECK(errno == ENOENT);
    CHECK(strstr(tr_error(), "does-not-exist") != NULL);
}

/* A Fashion-MNIST-like directory: n training and m test images of side x side
 * pixels (pixel(i, j) = (i + j) % 256), labels i % 10; tweak breaks it. */
enum tweak { OK, BAD_SIDE, BAD_NDIMS, LABEL_COUNT, LABEL_RANGE, RAW };

static void make_fmnist(const char *sub, size_t n, size_t m, enum tweak t)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, sub);
    CHECK(mkdir(dir, 0700) == 0);
    static unsigned char buf[1 << 20];
    const char *split[2] = {"train", "t10k"};
    for (int s = 0; s < 2; s++) {
        size_t cnt = s ? m : n;
        size_t side = t == BAD_SIDE ? 27 : 28;
        size_t len = 0;
        buf[len++] = 0;
        buf[len++] = 0;
        buf[len++] = 8;
        buf[len++] = t == BAD_NDIMS ? 2 : 3;
        size_t d[3] = {cnt, side, 28};
        for (int i = 0; i < (t == BAD_NDIMS ? 2 : 3); i++) {
            size_t v = t == BAD_NDIMS && i == 1 ? side * 28 : d[i];
            buf[len++] = (unsigned char)(v >> 24);
            buf[len++] = (unsigned char)(v >> 16);
            buf[len++] = (unsigned char)(v >> 8);
            buf[len++] = (unsigned char)v;
        }
        for (size_t i = 0; i < cnt; i++)
            for (size_t j = 0; j < side * 28; j++) buf[len++] = (unsigned char)((i + j) % 256);
        char p[600];
        snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte%s", dir, split[s], t == RAW ? "" : ".gz");
        write_bytes(p, t != RAW, buf, len);
        size_t nl = t == LABEL_COUNT && s == 0 ? cnt - 1 : cnt;
        len = 0;
        buf[len++] = 0;
        buf[len++] = 0;
        buf[len++] = 8;
        buf[len++] = 1;
        buf[len++] = (unsigned char)(nl >> 24);
        buf[len++] = (unsigned char)(nl >> 16);
        buf[len++] = (unsigned char)(nl >> 8);
        buf[len++] = (unsigned char)nl;
        for (size_t i = 0; i < nl; i++) buf[len++] = (unsigned char)(t == LABEL_RANGE && i == 2 ? 10 : i % 10);
        snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte%s", dir, split[s], t == RAW ? "" : ".gz");
        write_bytes(p, t != RAW, buf, len);
    }
}

static void expect_load_error(const char *sub, const char *needle, const char *file)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, sub);
    dataset_t tr = {0}, te = {0};
    CHECK_MSG(fmnist_load(dir, 0, 0, 1, &tr, &te) != 0, "%s: load should fail", sub);
    CHECK(tr.x == NULL && te.x == NULL);
    const char *msg = tr_error();
    CHECK_MSG(strstr(msg, needle) != NULL, "message \"%s\" lacks \"%s\"", msg, needle);
    if (file) CHECK_MSG(strstr(msg, file) != NULL, "message \"%s\" does not name %s", msg, file);
    printf("  ok: %s\n", msg);
}

static void test_fmnist(void)
{
    make_fmnist("fm_ok", 7, 3, OK);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fm_ok", tmpdir);
    /* 2 ranks: shards [0,3) and [3,7) */
    for (int r = 0; r < 2; r++) {
        dataset_t tr, te;
        CHECK_MSG(fmnist_load(dir, 0, r, 2, &tr, r == 0 ? &te : NULL) == 0, "%s", tr_error());
        CHECK(tr.dim == 784 && tr.n == (r ? 4u : 3u) && tr.first == (r ? 3u : 0u));
        for (size_t i = 0; i < tr.n; i++) {
            size_t g = tr.first + i;
            CHECK(tr.labels[i] == (int32_t)(g % 10));
            for (size_t j = 0; j < 784; j += 97) CHECK(tr.x[i * 784 + j] == (float)((g + j) % 256) / 255.0f);
        }
        float mx = 0;
        for (size_t i = 0; i < tr.n * 784; i++) mx = tr.x[i] > mx ? tr.x[i] : mx;
        CHECK(mx <= 1.0f && mx > 0.99f);
        if (r == 0) {
            CHECK(te.n == 3 && te.labels[2] == 2);
            dataset_free(&te);
        }
        dataset_free(&tr);
    }
    /* --train-limit 5: shards of the first 5 */
    dataset_t tr;
    CHECK(fmnist_load(dir, 5, 1, 2, &tr, NULL) == 0);
    CHECK(tr.n == 3 && tr.first == 2);
    dataset_free(&tr);

    make_fmnist("fm_raw", 4, 2, RAW);
    snprintf(dir, sizeof dir, "%s/fm_raw", tmpdir);
    CHECK_MSG(fmnist_load(dir, 0, 0, 1, &tr, NULL) == 0, "uncompressed files: %s", tr_error());
    dataset_free(&tr);

    expect_load_error("no_such_dir", "install the Debian package dataset-fashion-mnist", "train-images-idx3-ubyte");
    make_fmnist("fm_side", 4, 2, BAD_SIDE);
    expect_load_error("fm_side", "wrong dimensions", "train-images-idx3-ubyte.gz");
    make_fmnist("fm_ndims", 4, 2, BAD_NDIMS);
    expect_load_error("fm_ndims", "wrong dimensions", "train-images-idx3-ubyte.gz");
    make_fmnist("fm_count", 4, 2, LABEL_COUNT);
    expect_load_error("fm_count", "3 labels but", "train-labels-idx1-ubyte.gz");
    make_fmnist("fm_range", 4, 2, LABEL_RANGE);
    expect_load_error("fm_range", "out of range", "train-labels-idx1-ubyte.gz");
}

static void rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(void)
{
    tu_timeout(60);
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/pcoll-test-idx-XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(tmpdir) != NULL);
    test_reader();
    test_fmnist();
    rm_rf(tmpdir);
    printf("test_idx: %ld checks passed\n", tu_checks_);
    return 0;
}
