/* Loading Fashion-MNIST and generating the hyperplane regression data. */
#include "data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "idx.h"
#include "prng.h"

void dataset_free(dataset_t *d)
{
    if (!d) return;
    free(d->x);
    free(d->labels);
    free(d->y);
    memset(d, 0, sizeof *d);
}

void shard_range(size_t n, int rank, int nranks, size_t *begin, size_t *end)
{
    /* n * nranks stays far below 2^64 for any n that fits in memory */
    *begin = n * (size_t)rank / (size_t)nranks;
    *end = n * (size_t)(rank + 1) / (size_t)nranks;
}

/* dir/name.gz if it exists, else dir/name if it exists, else -1 with the
 * message that names the package. */
static int find_file(const char *dir, const char *name, char **path)
{
    const char *sfx[2] = {".gz", ""};
    for (int i = 0; i < 2; i++) {
        size_t len = strlen(dir) + strlen(name) + 5;
        char *p = malloc(len);
        if (!p) return tr_fail("out of memory");
        snprintf(p, len, "%s/%s%s", dir, name, sfx[i]);
        if (access(p, F_OK) == 0) {
            *path = p;
            return 0;
        }
        free(p);
    }
    return tr_fail("Fashion-MNIST not found: %s/%s.gz does not exist; install the Debian package %s "
                   "(apt-get install %s) or pass --data DIR",
                   dir, name, FMNIST_PACKAGE, FMNIST_PACKAGE);
}

/* Reads images and labels of one split, checks them against each other, and
 * keeps samples [begin, end) of the first `limit` as floats in [0, 1]. */
static int load_split(const char *dir, const char *prefix, size_t limit, int rank, int nranks, dataset_t *out)
{
    char img_name[64], lbl_name[64];
    snprintf(img_name, sizeof img_name, "%s-images-idx3-ubyte", prefix);
    snprintf(lbl_name, sizeof lbl_name, "%s-labels-idx1-ubyte", prefix);
    char *img_path = NULL, *lbl_path = NULL;
    idx_u8_t img = {0}, lbl = {0};
    int rc = -1;
    memset(out, 0, sizeof *out);
    if (find_file(dir, img_name, &img_path) || find_file(dir, lbl_name, &lbl_path)) goto done;
    if (idx_read_u8(img_path, &img) || idx_read_u8(lbl_path, &lbl)) goto done;
    if (img.ndims != 3) {
        tr_fail("%s: wrong dimensions: %zu dimensions, expected 3 (images x rows x columns)", img_path, img.ndims);
        goto done;
    }
    if (img.dims[1] != FMNIST_SIDE || img.dims[2] != FMNIST_SIDE) {
        tr_fail("%s: wrong dimensions: images are %zux%zu, expected %dx%d", img_path, img.dims[1], img.dims[2],
                FMNIST_SIDE, FMNIST_SIDE);
        goto done;
    }
    if (lbl.ndims != 1) {
        tr_fail("%s: wrong dimensions: %zu dimensions, expected 1 (one label per image)", lbl_path, lbl.ndims);
        goto done;
    }
    if (lbl.dims[0] != img.dims[0]) {
        tr_fail("%s: %zu labels but %s has %zu images", lbl_path, lbl.dims[0], img_path, img.dims[0]);
        goto done;
    }
    for (size_t i = 0; i < lbl.count; i++)
        if (lbl.data[i] >= FMNIST_CLASSES) {
            tr_fail("%s: label %u of image %zu is out of range 0..%d", lbl_path, lbl.data[i], i, FMNIST_CLASSES - 1);
            goto done;
        }
    size_t n = img.dims[0];
    if (limit && limit < n) n = limit;
    size_t begin, end;
    shard_range(n, rank, nranks, &begin, &end);
    const size_t dim = FMNIST_SIDE * FMNIST_SIDE;
    out->n = end - begin;
    out->dim = dim;
    out->first = begin;
    out->x = tr_alloc_floats(out->n * dim, "Fashion-MNIST images");
    out->labels = malloc((out->n ? out->n : 1) * sizeof *out->labels);
    if (!out->x || !out->labels) {
        if (out->x) tr_fail("Fashion-MNIST labels: out of memory");
        dataset_free(out);
        goto done;
    }
    for (size_t i = 0; i < out->n * dim; i++) out->x[i] = (float)img.data[begin * dim + i] / 255.0f;
    for (size_t i = 0; i < out->n; i++) out->labels[i] = lbl.data[begin + i];
    rc = 0;
done:
    idx_free(&img);
    idx_free(&lbl);
    free(img_path);
    free(lbl_path);
    return rc;
}

int fmnist_load(const char *dir, size_t limit, int rank, int nranks, dataset_t *train, dataset_t *test)
{
    memset(train, 0, sizeof *train);
    if (test) memset(test, 0, sizeof *test);
    if (load_split(dir, "train", limit, rank, nranks, train)) return -1;
    if (train->n == 0) {
        dataset_free(train);
        return tr_fail("Fashion-MNIST: rank %d of %d gets no training images (--train-limit too small?)", rank,
                       nranks);
    }
    if (test && load_split(dir, "t10k", 0, 0, 1, test)) {
        dataset_free(train);
        return -1;
    }
    return 0;
}

/* the stream of hyperplane point i (validation points follow training ones) */
static void hyperplane_point(const hyperplane_cfg_t *c, const float *a, float intercept, size_t i, float *x, float *y)
{
    rng_t r;
    rng_seed(&r, rng_key(c->seed, 0x48595045 /* "HYPE" */, i, 0));
    const float half = 1.7320508f; /* sqrt(3): unit variance */
    double dot = 0.0;
    for (size_t j = 0; j < c->dim; j += 2) {
        /* two 24-bit uniforms per 64-bit draw: generating 268M features
           costs well under a second */
        uint64_t v = rng_next(&r);
        x[j] = ((float)(v >> 40) * 0x1.0p-24f * 2.0f - 1.0f) * half;
        dot += (double)a[j] * x[j];
        if (j + 1 < c->dim) {
            x[j + 1] = ((float)((v >> 16) & 0xFFFFFF) * 0x1.0p-24f * 2.0f - 1.0f) * half;
            dot += (double)a[j + 1] * x[j + 1];
        }
    }
    *y = (float)(dot + intercept + c->noise * rng_normal(&r));
}

static int hyperplane_range(const hyperplane_cfg_t *c, const float *a, float intercept, size_t first, size_t n,
                            dataset_t *out)
{
    memset(out, 0, sizeof *out);
    if (n && c->dim > SIZE_MAX / n) return tr_fail("hyperplane: %zu x %zu points do not fit in memory", n, c->dim);
    out->x = tr_alloc_floats(n * c->dim, "hyperplane data");
    out->y = tr_alloc_floats(n, "hyperplane targets");
    if (!out->x || !out->y) {
        dataset_free(out);
        return -1;
    }
    out->n = n;
    out->dim = c->dim;
    out->first = first;
    for (size_t i = 0; i < n; i++) hyperplane_point(c, a, intercept, first + i, out->x + i * c->dim, out->y + i);
    return 0;
}

int hyperplane_make(const hyperplane_cfg_t *c, int rank, int nranks, dataset_t *train, dataset_t *val)
{
    memset(train, 0, sizeof *train);
    if (val) memset(val, 0, sizeof *val);
    if (c->dim == 0 || c->train_points == 0) return tr_fail("hyperplane: dimension and training points must be >= 1");
    float *a = tr_alloc_floats(c->dim, "hyperplane coefficients");
    if (!a) return -1;
    rng_t r;
    rng_seed(&r, rng_key(c->seed, 0x48595045, UINT64_MAX, 1));
    const double scale = sqrt(3.0 / (double)c->dim); /* variance 1/dim */
    for (size_t j = 0; j < c->dim; j++) a[j] = (float)((2.0 * rng_uniform(&r) - 1.0) * scale);
    const float intercept = (float)(2.0 * rng_uniform(&r) - 1.0);
    size_t begin, end;
    shard_range(c->train_points, rank, nranks, &begin, &end);
    int rc = -1;
    if (end == begin) {
        tr_fail("hyperplane: rank %d of %d gets no training points (--train-points too small)", rank, nranks);
        goto done;
    }
    if (hyperplane_range(c, a, intercept, begin, end - begin, train)) goto done;
    if (val && hyperplane_range(c, a, intercept, c->train_points, c->val_points, val)) {
        dataset_free(train);
        goto done;
    }
    rc = 0;
done:
    free(a);
    return rc;
}
