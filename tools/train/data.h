/* The training tasks' data: Fashion-MNIST from IDX files, and the eager-SGD
 * paper's synthetic hyperplane regression.  Each rank holds only its shard of
 * the training set; the evaluation set is loaded where asked (rank 0). */
#ifndef PCOLL_TRAIN_DATA_H
#define PCOLL_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct dataset {
    size_t n;         /* samples */
    size_t dim;       /* features per sample */
    float *x;         /* n x dim */
    int32_t *labels;  /* classification: n labels, else NULL */
    float *y;         /* regression: n targets, else NULL */
    size_t first;     /* index of x[0] in the full set (shards) */
} dataset_t;

void dataset_free(dataset_t *d);

/* Rank r of P takes the contiguous share [r*n/P, (r+1)*n/P) of n samples. */
void shard_range(size_t n, int rank, int nranks, size_t *begin, size_t *end);

#define FMNIST_PACKAGE "dataset-fashion-mnist"
#define FMNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define FMNIST_SIDE 28
#define FMNIST_CLASSES 10

/* Loads this rank's shard of the first `limit` training images (0 = all
 * 60000) into train and, if test != NULL, the 10000 test images.  Files in
 * dir: {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz (or without .gz).
 * Pixels scaled to [0, 1].  Errors name the file and the problem, or the
 * Debian package when the files are missing. */
int fmnist_load(const char *dir, size_t limit, int rank, int nranks, dataset_t *train, dataset_t *test);

/* y = a.x + c + noise (paper 7.2.1).  x_j uniform in [-sqrt3, sqrt3] (unit
 * variance), a_j uniform with variance 1/dim, so a.x has variance about 1
 * over the points (a model predicting the mean has MSE ~1), c uniform in
 * [-1, 1], noise normal with standard deviation `noise` (the best possible
 * validation MSE is noise^2).  Point i depends only on (seed, i), so
 * every rank can generate just its shard; training points are 0..train-1,
 * validation points follow. */
typedef struct hyperplane_cfg {
    size_t dim;
    size_t train_points;
    size_t val_points;
    double noise;
    uint64_t seed;
} hyperplane_cfg_t;

int hyperplane_make(const hyperplane_cfg_t *cfg, int rank, int nranks, dataset_t *train, dataset_t *val);

#endif
