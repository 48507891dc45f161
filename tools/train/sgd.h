/* The optimizer: SGD with momentum on the flat parameter array. */
#ifndef PCOLL_TRAIN_SGD_H
#define PCOLL_TRAIN_SGD_H

#include <stddef.h>

/* velocity = momentum * velocity + update;  params -= lr * velocity
 * (with momentum 0 simply params -= lr * update). */
void sgd_step(float *params, float *velocity, const float *update, size_t n, float lr, float momentum);

#endif
