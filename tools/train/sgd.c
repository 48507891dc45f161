/* SGD with (heavy-ball) momentum, the form PyTorch uses. */
#include "sgd.h"

void sgd_step(float *params, float *velocity, const float *update, size_t n, float lr, float momentum)
{
    if (momentum == 0.0f) {
        /* no velocity at all: with partial collectives the ranks then stay
           equal up to rounding, whatever the grouping of delivered rounds */
        for (size_t i = 0; i < n; i++) params[i] -= lr * update[i];
        return;
    }
    for (size_t i = 0; i < n; i++) {
        velocity[i] = momentum * velocity[i] + update[i];
        params[i] -= lr * velocity[i];
    }
}
