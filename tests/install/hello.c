/* Built against an installed pcoll with pkg-config: init, one allreduce, finalize. */
#include <pcoll.h>
#include <stdio.h>

int main(void)
{
    pcoll_t *ctx;
    if (pcoll_init(MPI_COMM_WORLD, &ctx) != PCOLL_SUCCESS) { /* initializes MPI itself */
        fprintf(stderr, "pcoll_init: %s\n", pcoll_last_error());
        return 1;
    }
    int one = 1, sum = 0;
    int rc = pcoll_allreduce(ctx, &one, &sum, 1, PCOLL_INT32, PCOLL_SUM, NULL, 0);
    int ok = rc == PCOLL_SUCCESS && sum == pcoll_size(ctx);
    if (pcoll_rank(ctx) == 0) printf("installed pcoll: %d ranks, sum %d: %s\n", pcoll_size(ctx), sum, ok ? "ok" : "WRONG");
    pcoll_finalize(&ctx); /* finalizes MPI: pcoll_init initialized it */
    return ok ? 0 : 1;
}
