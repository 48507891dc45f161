/* A multilayer perceptron: dense layers with ReLU between them, and either
 * softmax cross-entropy (classification) or mean squared error (regression)
 * on the last layer.  All parameters live in one float array (per layer: the
 * weights, in x out row-major, then the biases; layer after layer) so that
 * a gradient is one buffer for the exchange and each layer's part of it is
 * contiguous. */
#ifndef PCOLL_TRAIN_MLP_H
#define PCOLL_TRAIN_MLP_H

#include <stddef.h>
#include <stdint.h>

typedef enum mlp_loss {
    MLP_SOFTMAX_XENT = 0, /* labels in 0..width[last]-1 */
    MLP_MSE = 1           /* sum over outputs of (prediction - y)^2, mean over samples */
} mlp_loss_t;

typedef struct mlp {
    size_t nlayers; /* dense layers */
    size_t *width;  /* nlayers + 1: input, hidden..., output */
    size_t *w_off;  /* offset of layer l's weights in the parameter array */
    size_t *b_off;  /* offset of layer l's biases */
    size_t nparams;
    mlp_loss_t loss;
} mlp_t;

/* One batch: x is n x width[0]; labels (n) for MLP_SOFTMAX_XENT, y
 * (n x width[last]) for MLP_MSE. */
typedef struct mlp_batch {
    const float *x;
    const int32_t *labels;
    const float *y;
    size_t n;
} mlp_batch_t;

typedef struct mlp_work mlp_work_t;

/* nwidths >= 2 widths, each >= 1.  Returns -1 with a message on error. */
int mlp_create(const size_t *widths, size_t nwidths, mlp_loss_t loss, mlp_t **out);
void mlp_free(mlp_t **m);

/* "784,512,256,128,10" -> widths (malloc'ed); an item WxN stands for N layers
 * of width W ("784,512x12,10": 13 dense layers).  -1 with a message if
 * malformed. */
int mlp_parse_widths(const char *spec, size_t **widths, size_t *nwidths);
/* "784-512-256-128-10" into buf. */
void mlp_describe(const mlp_t *m, char *buf, size_t len);

/* Same values from the same seed on every rank: He uniform (limit
 * sqrt(6/fan_in)) for layers followed by ReLU, Glorot uniform (limit
 * sqrt(6/(fan_in+fan_out))) for the last layer, biases zero. */
void mlp_init_params(const mlp_t *m, float *params, uint64_t seed);

/* Buffers for batches of up to max_batch samples. */
int mlp_work_create(const mlp_t *m, size_t max_batch, mlp_work_t **out);
void mlp_work_free(mlp_work_t **w);

/* Forward and backward pass on a batch (1 <= n <= max_batch): grad (nparams)
 * receives the gradient of the batch's mean loss; returns that mean loss. */
double mlp_loss_grad(const mlp_t *m, const float *params, mlp_work_t *w, const mlp_batch_t *b, float *grad);

/* The same, calling hook(arg, -1) once the forward pass and the loss are
 * done, then hook(arg, l) as backprop completes layer l's gradient (its
 * weights and biases: grad[w_off[l] .. b_off[l] + width[l + 1])), from the
 * last layer down to 0. */
typedef void (*mlp_layer_hook_t)(void *arg, int layer);
double mlp_loss_grad_hooked(const mlp_t *m, const float *params, mlp_work_t *w, const mlp_batch_t *b, float *grad,
                            mlp_layer_hook_t hook, void *arg);

/* Mean loss over n samples (forward only, in chunks of max_batch), and for
 * classification the fraction classified correctly (else NAN). */
typedef struct mlp_eval {
    double loss;
    double accuracy;
    size_t n;
} mlp_eval_t;
void mlp_evaluate(const mlp_t *m, const float *params, mlp_work_t *w, const mlp_batch_t *all, mlp_eval_t *out);

/* Floating-point operations of the dense layers per sample in mlp_loss_grad
 * (forward, weight gradients, input gradients of every layer but the first). */
double mlp_flops_per_sample(const mlp_t *m);

#endif
