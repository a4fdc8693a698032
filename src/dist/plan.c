/* Shard maps and fusion buckets: pure functions of sizes, no MPI. */
#include "dtrain/dist.h"

void dt_shard_range(size_t n, int shards, int s, size_t *lo, size_t *hi) {
    /* The first n % shards shards get one extra float. */
    size_t base = n / (size_t)shards, extra = n % (size_t)shards, us = (size_t)s;
    *lo = us * base + (us < extra ? us : extra);
    *hi = *lo + base + (us < extra ? 1 : 0);
}

int dt_bucket_plan(dt_bucket *out, int max, const dt_net *net, size_t bucket_floats) {
    return dt_bucket_plan_layers(out, max, net->param_offset, net->nlayers, bucket_floats);
}

int dt_bucket_plan_layers(dt_bucket *out, int max, const size_t *param_offset, int nlayers,
                          size_t bucket_floats) {
    int nb = 0;
    size_t open_hi = 0, open_lo = 0; /* the bucket being filled: [open_lo, open_hi) */
    int open = 0;
    for (int i = nlayers - 1; i >= 0; i--) {
        size_t lo = param_offset[i], hi = param_offset[i + 1];
        if (lo == hi) continue;
        if (bucket_floats == 0) { /* one bucket per layer */
            if (nb >= max) return -1;
            out[nb++] = (dt_bucket){lo, hi, i};
            continue;
        }
        /* Walk the layer downwards from hi, closing a bucket whenever it is full. */
        size_t top = hi;
        while (top > lo) {
            if (!open) open = 1, open_hi = top, open_lo = top;
            size_t room = bucket_floats - (open_hi - open_lo);
            size_t take = top - lo < room ? top - lo : room;
            open_lo = top - take;
            top = open_lo;
            if (open_hi - open_lo == bucket_floats) {
                if (nb >= max) return -1;
                out[nb++] = (dt_bucket){open_lo, open_hi, i};
                open = 0;
            }
        }
        /* A bucket still open at a layer boundary keeps filling from the
         * layers below. */
    }
    /* Close the last bucket at the layer holding its lowest float. */
    if (open) {
        int i = 0;
        while (param_offset[i + 1] <= open_lo) i++;
        if (nb >= max) return -1;
        out[nb++] = (dt_bucket){open_lo, open_hi, i};
    }
    return nb;
}
